// Fuzz campaign, surface 4: lines on the runtime socket (HAProxy's command
// protocol): known verbs with hostile arguments, many commands on one line,
// long lines, control bytes, random bytes. Each line gets a reply (or the
// socket closes) within the time-out, and lb stays up.
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import net from 'node:net'
import { test } from 'node:test'
import { request, simpleConfig } from '../helpers.js'
import { backends, sock, startAdminLb } from '../admin/util.js'
import { LbWatch, type Verdict, caseCount, printable, report, runCases } from './lib/campaign.js'
import type { Rng } from './lib/prng.js'

const TIMEOUT = 3000
const VERBS = ['show info', 'show stat', 'show sess', 'show servers state', 'show errors', 'help', 'set server', 'get weight', 'set weight',
  'enable server', 'disable server', 'show stat web', 'show servers state', 'show', 'set', 'prompt', 'quit', 'show backend', 'set maxconn global']
const ARGS = ['web/s1', 'web/', '/s1', 'web/s1/x', 'nope/s1', 'state', 'ready', 'drain', 'maint', 'weight', '0', '-1', '256', '257', '100%', '99999999999999999999',
  '1e3', 'addr', '127.0.0.1', 'port', '0x10', '%E9', 'é', '\x00', '\x7f', '\t', '"', "'", '\\', '-1 -1 -1', '4', '2 -1']

interface LineCase { family: string, line: Buffer }

function lineCase (rng: Rng): LineCase {
  const kind = rng.int(10)
  if (kind === 0) return { family: 'random-bytes', line: Buffer.concat([rng.bytes(rng.range(1, 200)), Buffer.from('\n')]) }
  if (kind === 1) return { family: 'long-line', line: Buffer.from(`${rng.pick(VERBS)} ${'a'.repeat(rng.pick([1000, 70_000, 1_100_000]))}\n`) }
  const command = (): string => [rng.pick(VERBS), ...Array.from({ length: rng.int(5) }, () => rng.pick(ARGS))].join(rng.pick([' ', ' ', '  ', '\t']))
  const n = kind === 2 ? rng.range(2, 40) : 1
  return { family: kind === 2 ? 'many-commands' : 'command', line: Buffer.from(Array.from({ length: n }, command).join(rng.pick([';', ';', '; ', ';;'])) + rng.pick(['\n', '\n', '\r\n', '']), 'latin1') }
}

/** Writes one line, ends the input and reads until the server closes. */
function exchangeLine (path: string, line: Buffer): Promise<{ reply: string, closed: boolean }> {
  return new Promise((resolve) => {
    const c = net.connect(path)
    let reply = ''
    let done = false
    const finish = (closed: boolean): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      c.destroy()
      resolve({ reply, closed })
    }
    const timer = setTimeout(() => finish(false), TIMEOUT)
    c.on('connect', () => c.end(line)) // as socat does: the line, then the end of input
    c.on('data', (d: Buffer) => {
      reply += d.toString('latin1')
    })
    c.on('error', () => finish(true))
    c.on('close', () => finish(true))
  })
}

test('runtime socket lines: every line gets a reply or a close, and lb stays up', async (t) => {
  const [b1, b2] = await backends(2)
  const a = await startAdminLb(simpleConfig([b1!.address, b2!.address]))
  t.after(async () => { await a.lb.stop(); await b1!.close(); await b2!.close(); rmSync(a.lb.dir, { recursive: true, force: true }) })
  const watch = new LbWatch(a.lb)

  const exec = async (c: LineCase): Promise<Verdict | null> => {
    const r = await exchangeLine(a.sock, c.line)
    // a line without its newline is not a command yet: the server may wait for the rest
    if (!r.closed) return { check: 'open', expected: `the socket closed within ${TIMEOUT} ms of the end of input`, got: `still open; reply ${printable(r.reply, 200)}` }
    // a line over 64 KiB is cut off by a close (core/admin/runtime/runtime-socket.ts MAX_LINE)
    if (r.reply === '' && c.line.includes(0x0a) && c.line.length <= 64 * 1024 && !/^\s*quit/.test(c.line.toString('latin1'))) return { check: 'unanswered', expected: 'a reply to a command line', got: 'closed without a word' }
    return null
  }
  report(t, await runCases({
    surface: 'runtime-socket',
    count: caseCount(400),
    concurrency: 4,
    generate: lineCase,
    family: (c) => c.family,
    input: (c) => printable(c.line, 300),
    exec,
    watch: () => watch.check(),
  }))
  assert.match(await sock(a.sock, 'show info'), /^Name: lb\n/, 'the socket still answers')
  assert.equal((await request(`${a.lb.url}/after`)).status, 200, 'the data plane answers after the run')
})
