// Shared by the generation tests: start the real generation service (real
// runner process, real models) on a temporary unix socket plus a TCP port,
// and small HTTP helpers. Everything started here is stopped in t.after.

import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { request } from 'undici'
import { Checker } from '../../core/config/check.js'
import { checkGeneration, type GenerationConf } from '../../core/gen/config.js'
import { startGeneration, type GenerationService } from '../../core/gen/service.js'
import { createLogger } from '../../core/log.js'
import { type Lb, waitFor } from '../helpers.js'

/** The repository root (this file runs as dist/test/gen/helpers.js). */
export const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..', '..')
/** The shared model fixtures, beside the clone. */
export const FIXTURES = resolve(REPO, '..', 'shared', 'models')
export const STORIES = join(FIXTURES, 'stories260K.gguf')
export const RANDOM = join(FIXTURES, 'llama-2-tiny-random.gguf')
export const HOSTILE = join(FIXTURES, 'TinyStories-656K-Q8_0.gguf')

export interface Gen {
  svc: GenerationService
  conf: GenerationConf
  /** http://127.0.0.1:PORT of the TCP listener ('' without one). */
  base: string
  dir: string
}

export async function tempDir (t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'lb-gen-'))
  t.after(() => rm(dir, { recursive: true, force: true }))
  return dir
}

/** Starts the service with the fixtures as models "stories", "random" and "hostile"; `raw` overrides [generation] keys. */
export async function startGen (t: TestContext, raw: Record<string, unknown> = {}): Promise<Gen> {
  // one hook, in this order: t.after hooks run in the order they were added, and a folder removed under a running
  // service has its socket bound again by the service's own check (core/gen/http/socket.ts), in the folder rm is
  // emptying (ENOTEMPTY, and a server left listening)
  const dir = await mkdtemp(join(tmpdir(), 'lb-gen-'))
  let svc: GenerationService | null = null
  t.after(async () => {
    await svc?.close()
    await rm(dir, { recursive: true, force: true })
  })
  const c = new Checker()
  const conf = checkGeneration(c, {
    socket: 'gen.sock',
    listen: '127.0.0.1:0',
    ollama_models: 'off',
    restart_delay: '20ms',
    models: { stories: STORIES, random: RANDOM, hostile: HOSTILE },
    ...raw,
  }, 'generation', dir)
  if (c.problems.length > 0) throw new Error(c.problems.join('\n'))
  const started = await startGeneration(conf, createLogger(process.env.LB_TEST_LOG === '1' ? 'debug' : 'error'))
  svc = started
  return { svc: started, conf, base: started.tcpAddress === null ? '' : `http://127.0.0.1:${started.tcpAddress.port}`, dir }
}

export interface Reply { status: number, type: string, text: string, json: any }

/** POSTs a JSON body (a string is sent as is) and reads the whole reply. */
export async function post (base: string, path: string, body: unknown): Promise<Reply> {
  const r = await request(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
  return await read(r)
}

export async function get (base: string, path: string): Promise<Reply> {
  return await read(await request(`${base}${path}`))
}

async function read (r: Awaited<ReturnType<typeof request>>): Promise<Reply> {
  const text = await r.body.text()
  let json: unknown = null
  try { json = JSON.parse(text) } catch { json = null }
  return { status: r.statusCode, type: String(r.headers['content-type'] ?? ''), text, json }
}

/** The objects of an NDJSON body; fails on a line that is not JSON. */
export function lines (text: string): any[] {
  return text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l))
}

/** Polls until `f` returns true (or throws after `ms`). */
export async function until (f: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition'): Promise<void> {
  await waitFor(f, what, ms)
}

/**
 * Checks `v` against the JSON Schema subset the format tests use (type,
 * properties, required, additionalProperties false, items, prefixItems, enum,
 * const, oneOf/anyOf, local $ref, min/maxItems, min/maxLength, minProperties);
 * returns the first mismatch or null.
 */
export function schemaMismatch (schema: any, v: unknown, at = '$', root: any = schema): string | null {
  if (schema === true || schema === undefined) return null
  if (typeof schema.$ref === 'string') return schemaMismatch(root.$defs[schema.$ref.split('/').pop()], v, at, root)
  const branches = schema.oneOf ?? schema.anyOf
  if (branches !== undefined && branches.every((b: any) => schemaMismatch(b, v, at, root) !== null)) return `${at}: matches no branch`
  if ('const' in schema && JSON.stringify(schema.const) !== JSON.stringify(v)) return `${at}: not the const`
  if (typeof v === 'string') {
    const n = [...v].length
    if (schema.minLength !== undefined && n < schema.minLength) return `${at}: shorter than ${schema.minLength}`
    if (schema.maxLength !== undefined && n > schema.maxLength) return `${at}: longer than ${schema.maxLength}`
  }
  const types: string[] = schema.type === undefined ? [] : Array.isArray(schema.type) ? schema.type : [schema.type]
  const typeOf = (x: unknown): string => x === null ? 'null' : Array.isArray(x) ? 'array' : typeof x === 'number' ? (Number.isInteger(x) ? 'integer' : 'number') : typeof x
  if (types.length > 0) {
    const t = typeOf(v)
    if (!types.includes(t) && !(t === 'integer' && types.includes('number'))) return `${at}: expected ${types.join('|')}, got ${t}`
  }
  if (schema.enum !== undefined && !schema.enum.some((e: unknown) => JSON.stringify(e) === JSON.stringify(v))) return `${at}: not in enum`
  if (typeOf(v) === 'object') {
    const o = v as Record<string, unknown>
    for (const k of schema.required ?? []) if (!(k in o)) return `${at}: missing ${k}`
    for (const [k, sub] of Object.entries(schema.properties ?? {})) {
      if (k in o) { const m = schemaMismatch(sub, o[k], `${at}.${k}`, root); if (m !== null) return m }
    }
    if (schema.additionalProperties === false) {
      for (const k of Object.keys(o)) if (!(k in (schema.properties ?? {}))) return `${at}: unexpected ${k}`
    }
    const n = Object.keys(o).length
    if (schema.minProperties !== undefined && n < schema.minProperties) return `${at}: fewer than ${schema.minProperties} properties`
  }
  if (Array.isArray(v)) {
    if (schema.minItems !== undefined && v.length < schema.minItems) return `${at}: fewer than ${schema.minItems} items`
    if (schema.maxItems !== undefined && v.length > schema.maxItems) return `${at}: more than ${schema.maxItems} items`
    const pre: any[] = schema.prefixItems ?? []
    for (let i = 0; i < v.length; i++) {
      const sub = i < pre.length ? pre[i] : schema.items
      if (sub !== undefined) { const m = schemaMismatch(sub, v[i], `${at}[${i}]`, root); if (m !== null) return m }
    }
  }
  return null
}

/**
 * lb's config with the generation service behind the data plane: entry point "web" on {{PORT}} whose every path
 * goes to it, /metrics on a dashboard of its own (portOf('dashboard')), the service's socket in lb's folder, only
 * `models` (name = file), `generation` lines in [generation], then `extra` (keys, more entry points and routers).
 */
export function gatewayConfig (models: Readonly<Record<string, string>>, extra: string, generation = ''): string {
  return `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[dashboard]
address = "127.0.0.1:0"
insecure = true
metrics = true

[generation]
socket = "{{DIR}}/gen.sock"
ollama_models = "off"
builtin_model = false
${generation}
[generation.models]
${Object.entries(models).map(([name, file]) => `${name} = "${file}"`).join('\n')}

[routers.gen]
rule = "PathPrefix(\`/\`)"
entrypoints = ["web"]
service = "gen"
[services.gen]
kind = "generate"
${extra}`
}

/**
 * Waits for the next UTC minute (the window of the generation budgets' rpm and tpm) when this one ends within
 * 20 s: what a test counts next then falls in one window (its requests take well under a second each).
 */
export async function roomInMinute (): Promise<void> {
  const left = 60_000 - Date.now() % 60_000
  if (left < 20_000) await new Promise((resolve) => setTimeout(resolve, left + 50))
}

/** Runs `f` within one UTC minute (see roomInMinute); fails if a minute ended meanwhile anyway. */
export async function withinOneMinute (f: () => Promise<void>): Promise<void> {
  await roomInMinute()
  const m = Math.floor(Date.now() / 60_000)
  await f()
  if (Math.floor(Date.now() / 60_000) !== m) throw new Error('the test did not run within one UTC minute')
}

/** [[generation.servers]] entries for OpenAI-shaped servers (test/gen/fake-openai.ts): name -> base URL. */
export const openaiServers = (servers: Readonly<Record<string, string>>): string => Object.entries(servers).map(([name, url]) => `
[[generation.servers]]
name = "${name}"
kind = "openai"
url = "${url}/v1"
refresh = "10m"`).join('') + '\n'

/** The value of the sample `name` (with its labels) on lb's dashboard /metrics. */
export async function lbMetric (lb: Lb, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${await lb.portOf('dashboard')}/metrics`)).text()
  const m = new RegExp(`^${name.replace(/[{}"]/g, (c) => `\\${c}`)} (\\d+)$`, 'm').exec(text)
  if (m === null) throw new Error(`no ${name} in /metrics:\n${text.split('\n').filter((l) => l.startsWith(name.split('{')[0]!)).join('\n')}`)
  return Number(m[1])
}

/**
 * Asserts that metric `name` reaches `want`: a relayed request's end reaches the control plane as a message from
 * the worker, posted before the client sees the end; the scrape may be served before that message is read.
 */
export async function lbMetricIs (lb: Lb, name: string, want: number): Promise<void> {
  let got = await lbMetric(lb, name)
  for (let i = 0; i < 50 && got !== want; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    got = await lbMetric(lb, name)
  }
  assert.equal(got, want, name)
}
