// The campaign's runner, shared by every surface: how many cases (short mode in
// the test command, long mode with LB_FUZZ=long), the seed of each case, a
// bounded number in flight, a watch on the balancer (process exit, worker
// restarts), and one report per surface that names every failing case with
// its seed, bytes, expectation and outcome. Failures of families listed in
// PENDING (../pending.ts), and failures that are exactly a documented
// behaviour of the HTTP engine, uWS's or llhttp's (../engine-limits.ts), are
// reported apart and do not fail the test.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { type Lb, ROOT } from '../../helpers.js'
import { PENDING } from '../pending.js'
import { ENGINE_LIMITS, ENGINE_OF, type EngineLimit } from '../engine-limits.js'
import { Rng, seedOf } from './prng.js'

export const LONG = process.env.LB_FUZZ === 'long'
/** The campaign seed; every case's seed derives from it (print it, pass it back to reproduce). */
export const BASE_SEED = Number(process.env.LB_FUZZ_SEED ?? 20_261_124)
/** "surface:index": run that one case only. */
const ONLY = process.env.LB_FUZZ_ONLY ?? ''

/** Cases for a surface: `short` in the test command, LB_FUZZ_CASES or 10,000 in long mode. */
export function caseCount (short: number): number {
  if (process.env.LB_FUZZ_CASES !== undefined) return Number(process.env.LB_FUZZ_CASES)
  return LONG ? Math.max(10_000, short) : short
}

export interface Finding {
  surface: string
  index: number
  seed: number
  /** "generator family/failed check": what PENDING is keyed by */
  family: string
  /** what was sent, printable (see printable()) */
  input: string
  /** the bytes sent, when the surface gives them (CaseRun.bytes): what ENGINE_LIMITS entries match */
  raw: Buffer | null
  expected: string
  got: string
}

/** Bytes as a one-line string: printable ASCII kept, CR LF as \r \n, other bytes as \xNN. */
export function printable (b: Buffer | string, max = 600): string {
  const buf = typeof b === 'string' ? Buffer.from(b) : b
  let s = ''
  for (const c of buf.subarray(0, max)) {
    if (c === 0x0d) s += '\\r'
    else if (c === 0x0a) s += '\\n'
    else if (c === 0x5c) s += '\\\\'
    else if (c >= 0x20 && c < 0x7f) s += String.fromCharCode(c)
    else s += '\\x' + c.toString(16).padStart(2, '0')
  }
  return buf.length > max ? `${s}... (${buf.length} bytes)` : s
}

/**
 * Watches a running balancer: it must not exit and no worker may die. check()
 * says what happened since the last call (null: nothing).
 */
export class LbWatch {
  #restarts = 0
  #lb: Lb
  constructor (lb: Lb) { this.#lb = lb }

  /** watch this (restarted) balancer from now on */
  follow (lb: Lb): void {
    this.#lb = lb
    this.#restarts = 0
  }

  check (): string | null {
    const p = this.#lb.proc
    if (p.exitCode !== null || p.signalCode !== null) return `lb exited (code ${p.exitCode}, signal ${p.signalCode}): ${lastLines(this.#lb.log())}`
    const n = this.#lb.log().match(/worker exited|worker failed|runner died|uncaught/gi)?.length ?? 0
    if (n > this.#restarts) {
      this.#restarts = n
      return `worker restart or failure in the lb log: ${lastLines(this.#lb.log())}`
    }
    return null
  }
}

function lastLines (log: string): string {
  return log.trimEnd().split('\n').slice(-3).join(' | ')
}

/** A failed check: `check` names it (it joins the family in PENDING keys: "family/check"). */
export interface Verdict { check: string, expected: string, got: string }

export interface CaseRun<C> {
  surface: string
  count: number
  /** cases in flight at once */
  concurrency: number
  generate: (rng: Rng, index: number) => C
  family: (c: C) => string
  input: (c: C) => string
  /** the bytes a case sends (for ENGINE_LIMITS) */
  bytes?: (c: C) => Buffer
  /** runs one case: null when it held, else which check failed, what it expected and what happened */
  exec: (c: C, index: number) => Promise<Verdict | null>
  /** checked after each case; a message fails every case in flight then */
  watch?: () => string | null
  /** starts lb again after it exited (else the run stops there) */
  restart?: () => Promise<void>
}

export interface Outcome { surface: string, total: number, findings: Finding[], families: Map<string, number> }

/** Runs the cases of one surface and collects what failed. */
export async function runCases<C> (r: CaseRun<C>): Promise<Outcome> {
  const findings: Finding[] = []
  const families = new Map<string, number>()
  const [onlySurface, onlyIndex] = ONLY.split(':')
  const indices = ONLY === '' ? Array.from({ length: r.count }, (_, i) => i) : onlySurface === r.surface ? [Number(onlyIndex)] : []
  let next = 0
  let stopped = false
  const inFlight = new Set<number>()
  const cases = new Map<number, C>()
  const record = (index: number, c: C, v: Verdict): void => {
    const seed = seedOf(`${BASE_SEED}:${r.surface}:${index}`)
    findings.push({ surface: r.surface, index, seed, family: `${r.family(c)}/${v.check}`, input: r.input(c), raw: r.bytes?.(c) ?? null, expected: v.expected, got: v.got })
  }
  const lane = async (): Promise<void> => {
    while (next < indices.length && !stopped) {
      const index = indices[next++]!
      const c = r.generate(new Rng(seedOf(`${BASE_SEED}:${r.surface}:${index}`)), index)
      cases.set(index, c)
      families.set(r.family(c), (families.get(r.family(c)) ?? 0) + 1)
      inFlight.add(index)
      let verdict: Verdict | null
      try {
        verdict = await r.exec(c, index)
      } catch (err) {
        verdict = { check: 'harness', expected: 'the case runs to its end', got: `the harness threw: ${(err as Error).stack ?? String(err)}` }
      }
      if (verdict !== null) record(index, c, verdict)
      const crash = r.watch?.() ?? null
      if (crash !== null) {
        for (const i of inFlight) record(i, cases.get(i)!, { check: 'crash', expected: 'no crash and no worker restart (this case was in flight)', got: crash })
        // a dead process fails every later case the same way: start it again, or stop at the first
        if (crash.startsWith('lb exited')) {
          if (r.restart === undefined) stopped = true
          else await r.restart()
        }
      }
      inFlight.delete(index)
      cases.delete(index)
    }
  }
  await Promise.all(Array.from({ length: Math.min(r.concurrency, Math.max(1, indices.length)) }, lane))
  return { surface: r.surface, total: stopped ? next : indices.length, findings, families }
}

/**
 * Reports one surface: counts per family as diagnostics, the pending failures
 * apart, and fails with every unexpected failure spelled out.
 */
export function report (t: TestContext, o: Outcome): void {
  const listed = PENDING.filter((p) => p.surface === o.surface)
  const limits = ENGINE_LIMITS.filter((u) => u.surface === o.surface)
  const engine = ENGINE_OF[o.surface] ?? 'engine'
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8').replace(/\s+/g, ' ') // line breaks in prose are spaces
  for (const u of limits) assert.ok(readme.includes(u.readme), `README.md no longer documents the ${engine} behaviour "${u.does}" (expected the text ${JSON.stringify(u.readme)})`)
  const limitOf = (f: Finding): EngineLimit | undefined =>
    limits.find((u) => u.keys.includes(f.family) && (f.raw === null || u.when(f.raw)) && u.outcome(f.got))
  const pending = o.findings.filter((f) => listed.some((p) => p.family === f.family))
  const byEngine = o.findings.filter((f) => !pending.includes(f) && limitOf(f) !== undefined)
  const unexpected = o.findings.filter((f) => !pending.includes(f) && !byEngine.includes(f))
  const fams = [...o.families].sort().map(([f, n]) => `${f} ${n}`).join(', ')
  t.diagnostic(`${o.total} cases (seed ${BASE_SEED}${LONG ? ', long mode' : ''}): ${fams}`)
  t.diagnostic(`${o.findings.length} failed: ${pending.length} pending (test/fuzz/pending.ts), ${byEngine.length} documented ${engine} behaviour (test/fuzz/engine-limits.ts), ${unexpected.length} unexpected`)
  const keys = new Map<string, number>()
  for (const f of o.findings) keys.set(f.family, (keys.get(f.family) ?? 0) + 1)
  if (keys.size > 0) t.diagnostic(`failed by family/check: ${[...keys].sort().map(([k, n]) => `${k} ${n}`).join(', ')}`)
  const byFamily = new Map<string, Finding[]>()
  for (const f of pending) byFamily.set(f.family, [...(byFamily.get(f.family) ?? []), f])
  for (const [fam, fs] of byFamily) {
    const p = listed.find((x) => x.family === fam)!
    t.diagnostic(`pending ${fam} (issue ${p.issue}): ${fs.length} cases, e.g. ${describeFinding(fs[0]!)}`)
  }
  for (const u of limits) {
    const n = byEngine.filter((f) => limitOf(f) === u).length
    if (n > 0) t.diagnostic(`${engine}: ${u.does}: ${n} cases`)
  }
  for (const p of listed) {
    if (o.families.has(p.family.split('/')[0]!) && !byFamily.has(p.family)) t.diagnostic(`PENDING entry "${p.family}" (issue ${p.issue}) held in every case now: remove it`)
  }
  if (process.env.LB_FUZZ_VERBOSE === '1') for (const f of o.findings) t.diagnostic(describeFinding(f))
  assert.equal(unexpected.length, 0, `${unexpected.length} of ${o.total} cases failed:\n` +
    unexpected.slice(0, 25).map(describeFinding).join('\n') + (unexpected.length > 25 ? `\n... and ${unexpected.length - 25} more` : ''))
}

export function describeFinding (f: Finding): string {
  return `[${f.surface}:${f.index} seed ${f.seed} family ${f.family}] sent: ${f.input}\n    expected: ${f.expected}\n    got: ${f.got}\n    rerun: LB_FUZZ_SEED=${BASE_SEED} LB_FUZZ_ONLY=${f.surface}:${f.index}`
}
