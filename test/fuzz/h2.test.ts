// Fuzz campaign, surface 3: HTTP/2 frames built by hand (lib/h2-cases.ts)
// sent on a raw socket after the connection preface, to an h2c entry point
// and (a fifth of the cases) to an https one with ALPN h2. Each case holds
// when lb stays up (no exit, no worker restart), answers the valid streams
// with the backend's body, refuses what RFC 9113 says to refuse with the
// right frame and code (RST_STREAM for a stream error, GOAWAY for a
// connection error), forwards no request it refused, lets no DATA beyond
// content-length through, and a well-behaved client on its own session is
// served after the case.
import assert from 'node:assert/strict'
import { rmSync } from 'node:fs'
import http2 from 'node:http2'
import { test } from 'node:test'
import { sleep, startBackend, startLb } from '../helpers.js'
import { type Certs, makeCerts } from '../tls/certs.js'
import { LbWatch, type Verdict, caseCount, printable, report, runCases } from './lib/campaign.js'
import { type H2Case, h2Case, path } from './lib/h2-cases.js'
import { E, errorName } from './lib/h2-frames.js'
import { type Session, h2Session } from './lib/h2-session.js'
import { HUFFMAN_CODES } from './lib/hpack.js'

/** how long a case may wait for lb to settle it (ms) */
const TIMEOUT = 3000

const codes = (cs: readonly number[]): string => cs.map(errorName).join(' or ')

/**
 * How a connection error ended the session: 'closed' (GOAWAY with an
 * acceptable code, then the close), 'open' (that GOAWAY, but lb kept the
 * connection) or 'no'. nghttp2 sends the RFC's code itself for some errors
 * (COMPRESSION_ERROR, FRAME_SIZE_ERROR...); the others it hands to
 * node:http2, whose session.destroy(err) sends GOAWAY INTERNAL_ERROR (node's
 * default code for a destroy with an error; a plain node:http2 server does the
 * same). Over TLS node may destroy the socket before that GOAWAY is out: the
 * client sees the connection end without it.
 */
function connectionEnded (r: Session, tls: boolean, cs: readonly number[]): 'closed' | 'open' | 'no' {
  if (r.goaway !== null) return !(cs.includes(r.goaway.code) || r.goaway.code === E.INTERNAL_ERROR) ? 'no' : r.closed ? 'closed' : 'open'
  return tls && r.closed ? 'closed' : 'no'
}

function describe (r: Session, c: H2Case): string {
  const streams = [...r.streams].map(([id, x]) => `stream ${id}: ${x.reset !== null ? `RST_STREAM ${errorName(x.reset)}` : x.status !== 0 ? `status ${x.status}${x.ended ? '' : ' (not ended)'}` : 'nothing'}`)
  const trace = r.trace.length > 12 ? [...r.trace.slice(0, 6), `... ${r.trace.length - 10} more ...`, ...r.trace.slice(-4)] : r.trace
  return `${c.tls ? 'https' : 'h2c'}; ${r.goaway !== null ? `GOAWAY ${errorName(r.goaway.code)} (last stream ${r.goaway.lastStream})` : 'no GOAWAY'}; ` +
    `${r.closed ? `closed${r.error !== null ? ` (${r.error})` : ''}` : r.pingAcked ? 'open, closing PING answered' : 'open, closing PING not answered'} after ${r.ms} ms; ` +
    `${streams.join(', ') || 'no stream answered'}; lb sent ${trace.join(' ')}`
}

const OPEN = 'the connection closed after the GOAWAY (RFC 9113 §5.4.1: "MUST close the TCP connection")'

test('the HPACK Huffman code rebuilt from its lengths is RFC 7541 Appendix B', () => {
  // the first, a middle and the last codes as the RFC lists them
  assert.equal(HUFFMAN_CODES[0], 0x1ff8)
  assert.equal(HUFFMAN_CODES[48], 0x0) // '0'
  assert.equal(HUFFMAN_CODES[97], 0x3) // 'a'
  assert.equal(HUFFMAN_CODES[255], 0x3ffffee)
  assert.equal(HUFFMAN_CODES[256], 0x3fffffff) // EOS
})

test('raw HTTP/2 frames: lb serves, refuses with the right GOAWAY or RST_STREAM, forwards nothing refused, stays up', async (t) => {
  const certs: Certs = makeCerts()
  const heads: string[] = [] // every request head the backend got, at once (before any body): url then fields
  const backend = await startBackend('fz', (req, res) => {
    heads.push(`${req.url!} ${JSON.stringify(req.rawHeaders)}`)
    req.resume()
    req.on('end', () => res.end(`served ${req.url}`))
  })
  t.after(async () => { await backend.close(); rmSync(certs.dir, { recursive: true, force: true }) })
  const lb = await startLb(`
[global]
workers = 2
access_log = "off"
[entrypoints.h2c]
address = "127.0.0.1:0"
protocol = "h2c"
[entrypoints.h2s]
address = "127.0.0.1:0"
protocol = "https"
http2 = true
[entrypoints.h2s.tls]
cert = "${certs.server.cert}"
key = "${certs.server.key}"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[[services.web.servers]]
address = "${backend.address}"
check = false
max_fails = 0
`)
  t.after(async () => {
    if (process.env.LB_FUZZ_VERBOSE === '1') t.diagnostic(`lb's log: ${lb.log().slice(-3000)}`)
    await lb.stop()
    rmSync(lb.dir, { recursive: true, force: true })
  })
  const h2c = await lb.portOf('h2c')
  const h2s = await lb.portOf('h2s')
  const watch = new LbWatch(lb)

  // the well-behaved client: one session for the whole run, a request on it after every case
  const bystander = http2.connect(`http://127.0.0.1:${h2c}`)
  bystander.on('error', () => {})
  t.after(() => { bystander.destroy() })
  const served = (p: string): Promise<string> => new Promise((resolve) => {
    if (bystander.closed || bystander.destroyed) { resolve('the session is closed'); return }
    const req = bystander.request({ ':path': p })
    let body = ''
    const timer = setTimeout(() => { req.close(); resolve(`no answer within ${TIMEOUT} ms`) }, TIMEOUT)
    req.setEncoding('utf8')
    req.on('data', (d: string) => { body += d })
    req.on('end', () => { clearTimeout(timer); resolve(body === `served ${p}` ? '' : `got ${JSON.stringify(body)}`) })
    req.on('error', (err) => { clearTimeout(timer); resolve(err.message) })
  })

  const exec = async (c: H2Case, index: number): Promise<Verdict | null> => {
    const wait = [...c.served, ...(c.refusal?.level === 'stream' ? [c.refusal.stream] : [])]
    const r = await h2Session({ port: c.tls ? h2s : h2c, tls: c.tls, bytes: c.bytes, end: c.end, await: wait, timeoutMs: TIMEOUT })
    await sleep(50) // a forward that raced the end of the session reaches the backend within this
    const got = describe(r, c)
    const never = heads.filter((u) => u.startsWith(`/fz/${index}/never-`))
    if (never.length > 0) return { check: 'forwarded', expected: 'the refused request never reaches the backend', got: `the backend got ${never.join(', ')}; ${got}` }
    if (c.taint !== null) {
      const tainted = heads.filter((h) => h.includes(c.taint!))
      if (tainted.length > 0) return { check: 'field', expected: 'the field with a forbidden byte never reaches the backend', got: `the backend got ${tainted[0]}; ${got}` }
    }
    if (c.maxBody !== null) {
      const over = backend.requests.filter((q) => q.url === path(index, 'any', 1) && q.body > c.maxBody!)
      if (over.length > 0) return { check: 'body', expected: `at most the ${c.maxBody} bytes of content-length forwarded`, got: `the backend got ${over[0]!.body} bytes; ${got}` }
    }
    const f = c.refusal
    const ended = f === null ? 'no' : connectionEnded(r, c.tls, f.codes)
    if (f?.level === 'conn' && ended !== 'closed') {
      return ended === 'open'
        ? { check: 'goaway-open', expected: OPEN, got }
        : { check: 'goaway', expected: `GOAWAY ${codes(f.codes)} or INTERNAL_ERROR, then the close (a connection error)`, got }
    }
    const x = f === null ? undefined : r.streams.get(f.stream)
    if (f?.level === 'ignored' && x !== undefined && ended === 'no') {
      return { check: 'ignored', expected: `stream ${f.stream} dropped (no answer) or GOAWAY ${codes(f.codes)}`, got }
    }
    if (f?.level === 'stream') {
      const reset = x?.reset !== null && x?.reset !== undefined && f.codes.includes(x.reset)
      if (!reset && !(x !== undefined && x.status >= 400) && ended !== 'closed' && !(f.orIgnored === true && x === undefined)) {
        return ended === 'open'
          ? { check: 'goaway-open', expected: OPEN, got }
          : { check: 'rst-stream', expected: `RST_STREAM ${codes(f.codes)} on stream ${f.stream} (or a 4xx from lb, or the connection ended)`, got }
      }
    }
    // a connection error takes the case's other streams with it; otherwise each valid stream is answered
    if (!(f !== null && (r.goaway !== null || r.closed))) {
      for (const s of c.served) {
        const x = r.streams.get(s)
        if (x === undefined || !x.body.includes(`served ${path(index, 'ok', s)}`)) return { check: 'served', expected: `stream ${s} answered with the backend's body`, got }
      }
    }
    if (f === null && c.served.length > 0 && r.goaway !== null && r.goaway.code !== E.NO_ERROR) return { check: 'goaway-valid', expected: 'no GOAWAY with an error for a valid session', got }
    const by = await served(`/bystander/${index}`)
    if (by !== '') return { check: 'bystander', expected: 'the well-behaved client on its own session is served', got: `${by}; the case: ${got}` }
    return null
  }

  report(t, await runCases({
    surface: 'h2',
    count: caseCount(400),
    concurrency: 16,
    generate: h2Case,
    family: (c) => c.family,
    input: (c) => `${c.tls ? 'https' : 'h2c'} ${c.variant}: ${printable(c.bytes, 200)}`,
    bytes: (c) => c.bytes,
    exec,
    watch: () => watch.check(),
  }))
  assert.equal(await served('/bystander/end'), '', 'the session opened before the run is still served')
  const fresh = http2.connect(`https://127.0.0.1:${h2s}`, { rejectUnauthorized: false })
  fresh.on('error', () => {})
  const code = await new Promise<number>((resolve) => {
    const req = fresh.request({ ':path': '/after' })
    req.on('response', (h) => resolve(Number(h[':status'])))
    req.on('error', () => resolve(0))
    req.resume()
  })
  fresh.close()
  assert.equal(code, 200, 'a new client over https h2 is served after the run')
})
