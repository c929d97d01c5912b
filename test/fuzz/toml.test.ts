// Fuzz campaign, surface 6: configuration files. Mutations of conf/lb.toml and
// of a small file (lines dropped, doubled or cut, values of the wrong type,
// edge durations, sizes and integers, deep nesting, random bytes) go through
// the same loader `lb check` runs, in process; a few go through the real
// `lb check` command. Each is either accepted or refused with a config error
// (LB_ERR_CONFIG_*) that says where: never another exception, never a stack
// trace from the command, always exit 0 or 1.
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { parseConfig } from '../../core/configure.js'
import { isLbError } from '../../core/errors.js'
import { CLI, ROOT } from '../helpers.js'
import { type Verdict, caseCount, printable, report, runCases } from './lib/campaign.js'
import type { Rng } from './lib/prng.js'

const SHIPPED = readFileSync(join(ROOT, 'conf', 'lb.toml'), 'utf8')
const SMALL = `[global]
workers = 2
[timeouts]
connect = "5s"
client = "50s"
[limits]
max_body = "100M"
[entrypoints.web]
address = "127.0.0.1:8080"
[routers.web]
rule = "PathPrefix(\`/\`) && Host(\`a.test\`)"
service = "web"
middlewares = ["rl"]
[middlewares.rl]
type = "rateLimit"
average = 50
burst = 100
[services.web]
balance = "leastconn"
[[services.web.servers]]
address = "127.0.0.1:9001"
weight = 1
`
const VALUES = ['""', '"-1s"', '"1e99s"', '"0"', '"5"', '"5 s"', '"100Q"', '"-100M"', '"999999999999T"', '-1', '0', '1e309', '99999999999999999999',
  '9223372036854775807', '-9223372036854775808', 'nan', 'inf', 'true', '[]', '[1, "a"]', '{}', '{ a = 1 }', '"\\u0000"', '"é"', '"../../etc/passwd"',
  '"unix:"', '"127.0.0.1:0"', '"127.0.0.1:99999"', '"[::1]:80"', '"Host(`a`) &&"', '"PathPrefix(`/`) || ((("', '1979-05-27T07:32:00Z', '"auto"', '"x"']

interface TomlCase { family: string, text: string }

function tomlCase (rng: Rng): TomlCase {
  const lines = (rng.chance(0.5) ? SHIPPED : SMALL).split('\n')
  const kind = rng.int(6)
  if (kind === 0) return { family: 'deep', text: `${rng.pick(['a', '[global]\nx'])} = ${'['.repeat(rng.pick([100, 600, 5000]))}${rng.chance(0.5) ? ']'.repeat(600) : ''}\n` }
  if (kind === 1) return { family: 'bytes', text: lines.join('\n').slice(0, rng.int(3000)) + rng.bytes(rng.range(1, 50)).toString('latin1') }
  for (let i = rng.range(1, 4); i > 0; i--) {
    const at = rng.int(lines.length)
    const line = lines[at]!
    const op = rng.int(4)
    if (op === 0) lines.splice(at, 1)
    else if (op === 1) lines.splice(at, 0, line)
    else if (op === 2 && line.includes('=')) lines[at] = `${line.slice(0, line.indexOf('='))}= ${rng.pick(VALUES)}`
    else lines[at] = line.slice(0, rng.int(line.length + 1))
  }
  return { family: kind === 2 ? 'lines' : 'values', text: lines.join('\n') }
}

/** what is wrong with the loader's answer to `text`, or null */
function check (text: string, file: string): Verdict | null {
  try {
    parseConfig(text, file)
    return null
  } catch (err) {
    if (!isLbError(err) || !err.code.startsWith('LB_ERR_CONFIG')) return { check: 'exception', expected: 'a config error (LB_ERR_CONFIG_*)', got: (err as Error).stack?.split('\n').slice(0, 4).join(' | ') ?? String(err) }
    if (err.code === 'LB_ERR_CONFIG_PARSE' && !/line \d+|key '/.test(err.message)) return { check: 'no-line', expected: 'a syntax error that gives its line or key', got: err.message }
    return null
  }
}

test('configuration files: accepted, or refused with a config error that says where; `lb check` exits 0 or 1', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'lb-fuzz-toml-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(ROOT, 'conf', 'fuzz.toml') // not written: relative paths resolve as for conf/lb.toml
  report(t, await runCases({
    surface: 'toml',
    count: caseCount(800),
    concurrency: 1,
    generate: tomlCase,
    family: (c) => c.family,
    input: (c) => printable(c.text, 300),
    exec: async (c) => check(c.text, file),
  }))
  // the command itself: a process per case, so fewer
  report(t, await runCases({
    surface: 'toml-cli',
    count: Math.ceil(caseCount(8) / 50),
    concurrency: 2,
    generate: tomlCase,
    family: (c) => c.family,
    input: (c) => printable(c.text, 300),
    exec: async (c, i) => {
      const path = join(dir, `${i}.toml`)
      writeFileSync(path, c.text, 'latin1')
      const r = await new Promise<{ code: number | null, stderr: string }>((resolve) => {
        execFile(process.execPath, [CLI, 'check', '-c', path], { timeout: 15_000 }, (err, _out, stderr) => resolve({ code: err === null ? 0 : (err as { code?: number }).code ?? null, stderr }))
      })
      if (r.code !== 0 && r.code !== 1) return { check: 'exit', expected: 'exit 0 or 1 within 15 s', got: `exit ${r.code}: ${r.stderr.slice(0, 300)}` }
      if (/^\s+at /m.test(r.stderr)) return { check: 'stack', expected: 'a message, not a stack trace', got: r.stderr.slice(0, 400) }
      return null
    },
  }))
})
