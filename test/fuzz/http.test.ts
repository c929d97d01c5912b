// Fuzz campaign, surface 1: raw HTTP/1.1 requests (smuggling pairs CL.CL,
// CL.TE, TE.CL, TE.TE with obfuscated Transfer-Encoding, header and URI
// limits, bad chunk sizes, obs-fold, control bytes, bare LF, HTTP/0.9 and 1.0,
// absolute form, path tricks, Host variants) sent byte for byte to lb and to
// nginx, each in front of its own recording backend. Each case holds when lb
// stays up, answers (or closes) within the time-out wherever nginx does,
// forwards nothing where nginx rejects and forwards nothing, forwards no
// smuggled request nginx did not, and forwards nothing a correct proxy strips.
import { rmSync } from 'node:fs'
import { type TestContext, test } from 'node:test'
import { sleep, startLb } from '../helpers.js'
import { LbWatch, type Verdict, caseCount, printable, report, runCases } from './lib/campaign.js'
import { headProblem, pathProblem } from './lib/forwarded.js'
import { type HttpCase, httpCase } from './lib/http-cases.js'
import { type Exchange, exchange } from './lib/raw-client.js'
import { type RawBackend, startRawBackend } from './lib/raw-backend.js'
import { startNginx } from './lib/nginx.js'

/** how long a case may wait for an answer or a close (ms) */
const TIMEOUT = 2000

const outcome = (x: Exchange): string =>
  x.silent ? `nothing within ${TIMEOUT} ms` : `${x.statuses.length === 0 ? 'no status line' : `status ${x.statuses.join(', ')}`}${x.closed ? ', then closed' : ''} after ${x.ms} ms (${JSON.stringify(x.head.split('\r\n')[0])})`

/** Requests of backend `b` that carry `marker` (in the path or the X-Fz header). */
const seen = (b: RawBackend, marker: string): string[] => b.received.filter((r) => r.includes(marker))

const rejects = (x: Exchange): boolean => x.statuses.length === 0 || x.statuses[0]! >= 400
/** nginx refused it: an error status or a close; waiting (for a body it buffers whole) is no refusal */
const refused = (x: Exchange): boolean => !x.silent && rejects(x)
/**
 * The request line's method is a token nginx refuses for its case or its
 * characters (nginx takes upper-case letters, "_" and "-" only) and lb
 * forwards as written: methods are case-sensitive tokens (RFC 9110 §9.1), as
 * HAProxy and Traefik forward them. CONNECT and TRACE are refused by lb too.
 */
const tokenMethodNginxRefuses = (b: Buffer): boolean => {
  const m = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) /.exec(b.toString('latin1'))?.[1]
  return m !== undefined && !/^[A-Z_-]+$/.test(m) && !/^(connect|trace)$/i.test(m)
}

/**
 * An absolute-form target (RFC 9112 §3.2.2) whose host has a character RFC 3986's reg-name allows and nginx's
 * request-line parser refuses (it takes letters, digits, "." and "-"): `GET http://a_b.test/ HTTP/1.1`. nginx
 * serves the same name in a Host header; an engine = "node" entry point routes and forwards it by that host.
 */
const absoluteHostNginxRefuses = (b: Buffer): boolean => {
  const host = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+ [A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?# ]*)/.exec(b.toString('latin1'))?.[1]
  return host !== undefined && /^[A-Za-z0-9._~!$&'()*+,;=-]+(:\d*)?$/.test(host) && /[_~!$&'()*+,;=]/.test(host)
}

/**
 * The campaign against one entry point: `engine = "uws"` (surface "http") or `"node"` (surface "http-node"); what
 * each engine does before lb sees a byte, documented, is in ENGINE_LIMITS (../engine-limits.ts).
 */
async function campaign (t: TestContext, engine: 'uws' | 'node', surface: string): Promise<void> {
  const lbBackend = await startRawBackend()
  const ngxBackend = await startRawBackend()
  const nginx = await startNginx(ngxBackend.port)
  t.after(async () => { await nginx.stop(); await lbBackend.close(); await ngxBackend.close() }) // also when lb fails to start
  const lb = await startLb(`[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
engine = "${engine}"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[[services.web.servers]]
address = "127.0.0.1:${lbBackend.port}"
check = false
max_fails = 0
`)
  t.after(async () => { await lb.stop(); rmSync(lb.dir, { recursive: true, force: true }) })
  const watch = new LbWatch(lb)

  const exec = async (c: HttpCase, index: number): Promise<Verdict | null> => {
    const opts = { expect: c.markers.length, timeoutMs: TIMEOUT }
    const [a, n] = await Promise.all([exchange(lb.port, c.bytes, opts), exchange(nginx.port, c.bytes, opts)])
    await sleep(50) // "nothing more happens": a forward that raced the close would reach the backend within this
    const got = `lb: ${outcome(a)}; nginx: ${outcome(n)}`
    if (a.silent && !n.silent) return { check: 'silent', expected: `an answer or a close within ${TIMEOUT} ms, as nginx`, got }
    if (a.statuses.length === 0 && a.closed && !rejects(n)) {
      return { check: 'unanswered', expected: 'an answer: nginx forwarded it and answered', got }
    }
    for (const [k, marker] of c.markers.entries()) {
      // a hidden request counts where it came as a request: the backend answers one per connection, so a
      // connection that also holds the first request got it as that request's body
      const hidden = (b: RawBackend): string[] => seen(b, marker).filter((r) => k === 0 || !r.includes(c.markers[0]!))
      const byLb = hidden(lbBackend)
      const byNginx = hidden(ngxBackend)
      if (byLb.length === 0 || byNginx.length > 0) continue
      if (k > 0) return { check: 'smuggled', expected: `the request hidden in the body (${marker}) never reaches the backend (nginx did not forward it)`, got: `${got}; the backend got ${printable(byLb[0]!, 300)}` }
      if (refused(n) && !tokenMethodNginxRefuses(c.bytes) && !absoluteHostNginxRefuses(c.bytes)) return { check: 'forwarded', expected: 'nothing forwarded: nginx refused it and forwarded nothing', got: `${got}; the backend got ${printable(byLb[0]!, 300)}` }
    }
    const hops = [`X-Hop-${index}`, `X-Other-${index}`]
    for (const raw of c.markers.flatMap((m) => seen(lbBackend, m))) {
      const head = headProblem(raw, hops)
      if (head !== null) return { check: 'form', expected: 'a forwarded request a correct proxy would send', got: `${head}: ${printable(raw, 400)}` }
      const path = pathProblem(raw)
      if (path !== null) return { check: 'path-form', expected: 'the forwarded path normalised, no ambiguous escape', got: `${path}; ${got}` }
    }
    return null
  }

  report(t, await runCases({
    surface,
    count: caseCount(1200),
    concurrency: 96,
    generate: httpCase,
    family: (c) => c.family,
    input: (c) => printable(c.bytes),
    bytes: (c) => c.bytes,
    exec,
    watch: () => watch.check(),
  }))
}

test('raw HTTP/1.1 requests: lb answers, forwards and refuses as nginx does, and stays up', (t) => campaign(t, 'uws', 'http'))

// Node's llhttp (core/worker/transport/node/engine.ts): what it reads otherwise than nginx is in ENGINE_LIMITS ("http-node")
test('raw HTTP/1.1 requests on engine = "node": lb answers, forwards and refuses as nginx does, and stays up', (t) => campaign(t, 'node', 'http-node'))
