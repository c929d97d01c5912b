// Raw HTTP/1.1 requests for the campaign, one family per kind of hostile
// input. Each case carries markers ("fz<index>r<k>", in the path and in an
// X-Fz header) for each request it holds, so the backends' bytes tell which of
// its requests a proxy forwarded; `hop` names a header the client lists in
// Connection (a correct proxy never forwards it).
import type { Rng } from './prng.js'

export interface HttpCase {
  family: string
  bytes: Buffer
  /** one marker per request the bytes could hold (the second is a smuggled request) */
  markers: string[]
}

const CRLF = '\r\n'
type Head = Array<[string, string]>

function request (method: string, target: string, head: Head, body = '', version = 'HTTP/1.1', eol = CRLF): string {
  return `${method} ${target} ${version}${eol}${head.map(([k, v]) => `${k}: ${v}${eol}`).join('')}${eol}${body}`
}

/** The request a smuggling case hides in its body: seen by a backend only if a proxy split the stream there. */
const smuggled = (m: string): string => `GET /${m} HTTP/1.1${CRLF}Host: fuzz.test${CRLF}X-Fz: ${m}${CRLF}${CRLF}`

const TE_OBFUSCATED = [
  'chunked', 'Chunked', 'CHUNKED', ' chunked', 'chunked ', '\tchunked', 'xchunked', 'chunked, identity', 'identity, chunked',
  'gzip, chunked', 'chunked, chunked', 'identity', 'chunk', 'chunked\x0b', '\x0cchunked', 'chunked;q=1', '"chunked"', 'chunked,',
  ',chunked', 'chunkeD', 'ch\x00unked', 'chunked\r\n x', 'gzip',
]
const TE_NAMES = ['Transfer-Encoding', 'transfer-encoding', 'Transfer-Encoding ', 'Transfer_Encoding', 'Transfer-Encoding\t', ' Transfer-Encoding', 'Transfer-EncodinG']
// not '\t5': HTAB is optional whitespace before a value (RFC 9110 §5.6.3), so it is 5; nginx 1.22 refuses it, lb reads it as the RFC says
const CL_VALUES = ['-1', '+5', '0x5', '5 5', '5,5', '5, 6', '', ' ', '99999999999999999999', '1e3', '0005', '5\x00', '05 ', '18446744073709551616', '4294967301', '5\t6']
const CHUNK_SIZES = ['-5', 'fffffffffffffffff', '0x5', '+5', ' 5', '5 ', '5;', '5;a=b', '5;a="x\r\ny"', 'g', '', '5\n', '00000000000000000005', '7fffffffffffffff', '8000000000000000', '1\x00']
// chunk-size lines for a chunk of n bytes that uWS 20.57 reads as another size (README, "Chunked request bodies")
const SMUGGLE_SIZES = [
  (h: string) => ` ${h}`, (h: string) => `\t${h}`, (h: string) => `${h} `, (h: string) => `${h}\t`, (h: string) => `${h} ;x`, (h: string) => `0x${h}`,
  (h: string) => `+${h}`, (h: string) => `;${h}`, (h: string) => `g${h}`, (h: string) => `${'0'.repeat(30)}${h}`, () => '', () => '0 ', () => ' 0',
]
const PATHS = [
  '/./x', '/a/../x', '/..', '/../x', '/%2e%2e/x', '/%2E/x', '//x', '///x', '/a//b', '/%2F', '/a%2fb', '/%5C', '/a\\b', '/%00', '/%25', '/%252e',
  '/%3B', '/a;b', '/%3F', '/%23', '/a#b', '/%70', '/%7E', '/%7e', '/%41', '/%zz', '/%', '/%4', '/\xe9', '/%e9', '/\x01', '/\x7f', '/a%20b', '/a b',
  '/x/..%2f..%2fetc', '/.%2e/x', '/a/./b/../../c', '*', '', 'x', '?q', '/?a=%00&b=..',
]
const HOSTS = [
  'fuzz.test', 'FUZZ.TEST', 'fuzz.test.', 'fuzz.test:80', 'fuzz.test:', 'fuzz.test:99999', 'fuzz.test:abc', '', ' ', 'evil.com/x', 'good evil',
  'a@fuzz.test', '[::1]', '[::1', '127.0.0.1', 'fu\xe9z', 'fuzz..test', '-fuzz.test', 'fuzz.test\x00', 'x'.repeat(300), 'fuzz.test\t', '.', 'a_b.test',
]
const METHODS = ['GET', 'POST', 'HEAD', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE', 'CONNECT', 'get', 'G ET', 'GET\t', 'ÉGET', 'X'.repeat(40), 'PROPFIND', '']
const VERSIONS = ['HTTP/1.0', 'HTTP/0.9', 'HTTP/1.2', 'HTTP/2.0', 'HTTP/3', 'http/1.1', 'HTTP/1.1 ', 'HTTP/1.01', 'HTTP/11', 'HTTP/1', 'HTTP /1.1', '']
const CONTROL = [0x00, 0x01, 0x08, 0x0b, 0x0c, 0x0d, 0x0a, 0x1b, 0x7f, 0x80, 0xff]

/** the families and their weights in a run */
const FAMILIES: Array<[string, number]> = [
  ['valid', 6], ['cl-cl', 5], ['cl-te', 6], ['te-cl', 6], ['te-te', 8], ['cl-value', 5], ['chunk-size', 6], ['header-syntax', 8],
  ['limits', 4], ['version', 5], ['request-line', 5], ['path', 8], ['host', 7], ['connection', 4], ['control-bytes', 6],
  ['bare-lf', 3], ['mutation', 6], ['garbage', 2], ['chunk-smuggle', 6],
]
const WEIGHT = FAMILIES.reduce((n, [, w]) => n + w, 0)

export function httpCase (rng: Rng, index: number): HttpCase {
  let x = rng.int(WEIGHT)
  let family = FAMILIES[0]![0]
  for (const [f, w] of FAMILIES) { if (x < w) { family = f; break } x -= w }
  const m0 = `fz${index}r0`
  const m1 = `fz${index}r1`
  const base = (): Head => [['Host', 'fuzz.test'], ['X-Fz', m0]]
  const markers = [m0]
  let text: string
  switch (family) {
    case 'valid': {
      const body = rng.chance(0.5) ? rng.word(40) : ''
      const head = base()
      for (let i = rng.int(6); i > 0; i--) head.push([`X-${rng.word(8).replace(/[^A-Za-z0-9-]/g, 'a')}`, rng.word(30).replace(/\\/g, '/')])
      if (body !== '') head.push(['Content-Length', String(body.length)])
      text = request(body === '' ? 'GET' : 'POST', `/${m0}/${rng.word(10).replace(/[^A-Za-z0-9]/g, '')}?q=${rng.int(1000)}`, head, body)
      break
    }
    case 'cl-cl': {
      const inner = smuggled(m1)
      markers.push(m1)
      const a = rng.pick(['0', '3', String(inner.length)])
      const b = rng.pick(['30', String(inner.length + 3), '0', a])
      const head = base()
      head.push(['Content-Length', a], ...(rng.chance(0.5) ? [['X-Between', '1'] as [string, string]] : []), ['Content-Length', b])
      text = request('POST', `/${m0}`, head, `abc${inner}`)
      break
    }
    case 'cl-te': case 'te-cl': {
      const inner = smuggled(m1)
      markers.push(m1)
      const te: [string, string] = [rng.pick(TE_NAMES.slice(0, 2)), rng.pick(['chunked', 'chunked', ' chunked', 'Chunked'])]
      const head = base()
      // CL.TE: a front end that believes CL sends it all, one that believes TE ends at the 0-chunk and sees a second request
      // TE.CL: a front end that believes TE sends it all, one that believes CL (4) sees "5c\r\n" then a request
      const chunkedPrefix = family === 'cl-te' ? `0${CRLF}${CRLF}${inner}` : `${(inner.length).toString(16)}${CRLF}${inner}${CRLF}0${CRLF}${CRLF}`
      const cl: [string, string] = ['Content-Length', family === 'cl-te' ? String(chunkedPrefix.length) : String(rng.pick([3, 4, 5]))]
      if (rng.chance(0.5)) head.push(cl, te); else head.push(te, cl)
      text = request('POST', `/${m0}`, head, chunkedPrefix)
      break
    }
    case 'te-te': {
      const inner = smuggled(m1)
      markers.push(m1)
      const head = base()
      const name = rng.pick(TE_NAMES)
      if (rng.chance(0.3)) head.push(['Transfer-Encoding', 'chunked'], [name, rng.pick(TE_OBFUSCATED)])
      else head.push([name, rng.pick(TE_OBFUSCATED)])
      if (rng.chance(0.5)) head.push(['Content-Length', String(3 + rng.int(4))])
      text = request('POST', `/${m0}`, head, `0${CRLF}${CRLF}${inner}`)
      break
    }
    case 'cl-value': {
      const head = base()
      const v = rng.chance(0.15) ? String(200 * 1024 * 1024) : rng.pick(CL_VALUES)
      head.push(['Content-Length', v])
      if (rng.chance(0.3)) head.push(['Expect', '100-continue'])
      text = request('POST', `/${m0}`, head, 'hello')
      break
    }
    case 'chunk-size': {
      const head = base()
      head.push(['Transfer-Encoding', 'chunked'])
      const size = rng.pick(CHUNK_SIZES)
      const tail = rng.pick([`hello${CRLF}0${CRLF}${CRLF}`, `hello${CRLF}`, 'hello', `hel${CRLF}0${CRLF}${CRLF}`, `hello${CRLF}0${CRLF}X: y${CRLF}${CRLF}`, `hello0${CRLF}${CRLF}`])
      text = request('POST', `/${m0}`, head, `${size}${CRLF}${tail}`)
      break
    }
    case 'chunk-smuggle': {
      // a whole request as the data of a chunk whose size line is spelled so that uWS ends the body before it
      const head = base()
      head.push(['Transfer-Encoding', 'chunked'])
      const inner = smuggled(m1)
      markers.push(m1)
      const size = rng.pick(SMUGGLE_SIZES)(inner.length.toString(16))
      const eol = rng.pick([CRLF, '\n'])
      text = request('POST', `/${m0}`, head, `${size}${eol}${inner}${CRLF}0${CRLF}${CRLF}`)
      break
    }
    case 'header-syntax': {
      const head = base()
      const bad = rng.pick<() => [string, string]>([
        () => ['X-Space ', 'a'], () => ['X Space', 'a'], () => ['', 'empty-name'], () => ['X(paren)', 'a'], () => ['X@at', 'a'],
        () => ['X-Fold', `a${CRLF} folded`], () => ['X-Fold', `a${CRLF}\tfolded`], () => ['X-Nul', 'a\x00b'], () => ['X-Del', 'a\x7fb'],
        () => ['X-Ctl', `a${String.fromCharCode(rng.pick(CONTROL))}b`], () => ['X-Cr', 'a\rb'], () => ['Content-Length\x00', '5'],
        () => ['X-Latin', 'caf\xe9'], () => ['X-No-Colon-' + rng.word(5).replace(/:/g, ''), ''], () => ['X-Under_score', 'a'],
      ])()
      const line = bad[0].startsWith('X-No-Colon') ? `${bad[0]}${CRLF}` : null
      const at = rng.int(head.length + 1)
      if (line === null) head.splice(at, 0, bad)
      text = line === null ? request('GET', `/${m0}`, head) : `GET /${m0} HTTP/1.1${CRLF}Host: fuzz.test${CRLF}${line}X-Fz: ${m0}${CRLF}${CRLF}`
      if (bad[0] === 'X-Fold' && rng.chance(0.5)) text = text.replace(`X-Fz: ${m0}${CRLF}`, `X-Fz: ${m0}${CRLF} continued${CRLF}`)
      break
    }
    case 'limits': {
      const head = base()
      const kind = rng.int(4)
      if (kind === 0) for (let i = rng.range(40, LIMIT_HEADERS); i > 0; i--) head.push([`X-H${i}`, 'v'])
      else if (kind === 1) head.push(['X-Big', 'v'.repeat(rng.pick([4000, 8000, 16_000, 64_000, 200_000]))])
      else if (kind === 2) head.push(['Cookie', 'c=' + 'x'.repeat(rng.pick([3000, 9000, 33_000]))])
      text = request('GET', `/${m0}/${kind === 3 ? 'u'.repeat(rng.pick([2000, 4000, 8200, 16_500, 70_000])) : ''}`, head)
      break
    }
    case 'version': {
      const v = rng.pick(VERSIONS)
      const head = rng.chance(0.7) ? base() : [['X-Fz', m0] as [string, string]]
      if (v === 'HTTP/1.0' && rng.chance(0.4)) head.push(['Connection', 'keep-alive'])
      text = v === '' ? `GET /${m0}${CRLF}` : request(rng.pick(['GET', 'HEAD', 'POST']), `/${m0}`, head, '', v)
      break
    }
    case 'request-line': {
      const method = rng.pick(METHODS)
      const target = rng.pick([`/${m0}`, `http://fuzz.test/${m0}`, `http://other.test/${m0}`, `HTTP://FUZZ.TEST/${m0}`, `https://fuzz.test/${m0}`, '*', 'fuzz.test:443', `/${m0} x`, `//fuzz.test/${m0}`, `ftp://fuzz.test/${m0}`])
      const sp = rng.pick([' ', ' ', '  ', '\t'])
      text = `${method}${sp}${target}${sp}HTTP/1.1${CRLF}Host: fuzz.test${CRLF}X-Fz: ${m0}${CRLF}${CRLF}`
      if (rng.chance(0.15)) text = CRLF + text
      break
    }
    case 'path': {
      const p = rng.pick(PATHS)
      const target = p.startsWith('/') ? `/${m0}${p}` : p
      text = request('GET', `${target}${rng.chance(0.2) ? '?x=/../%2F' : ''}`, base())
      break
    }
    case 'host': {
      const head: Head = [['X-Fz', m0]]
      const n = rng.pick([0, 1, 1, 2, 2, 3])
      for (let i = 0; i < n; i++) head.splice(rng.int(head.length + 1), 0, [rng.pick(['Host', 'host', 'HOST']), rng.pick(HOSTS)])
      const absolute = rng.chance(0.2)
      text = request('GET', absolute ? `http://${rng.pick(HOSTS)}/${m0}` : `/${m0}`, head)
      break
    }
    case 'connection': {
      const head = base()
      const hop = `X-Hop-${index}`
      head.push(['Connection', rng.pick([`keep-alive, ${hop}`, hop, `${hop}, close`, `${hop},Upgrade`, ` ${hop} `, `${hop.toLowerCase()}`])], [hop, 'hop'])
      if (rng.chance(0.3)) head.push(['Connection', `X-Other-${index}`], [`X-Other-${index}`, 'hop'])
      if (rng.chance(0.2)) head.push(['Upgrade', rng.pick(['h2c', 'websocket', 'foo'])])
      text = request('GET', `/${m0}`, head)
      break
    }
    case 'control-bytes': {
      const valid = request('GET', `/${m0}`, base())
      const at = rng.int(valid.length)
      text = valid.slice(0, at) + String.fromCharCode(rng.pick(CONTROL)) + valid.slice(at)
      break
    }
    case 'bare-lf': {
      text = request(rng.pick(['GET', 'POST']), `/${m0}`, [...base(), ['Content-Length', '0']], '', 'HTTP/1.1', rng.pick(['\n', '\r', '\n\r']))
      if (rng.chance(0.5)) text = text.replace('\n', '\r\n')
      break
    }
    case 'mutation': {
      let t = request('POST', `/${m0}`, [...base(), ['Content-Length', '5']], 'hello')
      for (let i = rng.range(1, 4); i > 0; i--) {
        const at = rng.int(t.length)
        const op = rng.int(3)
        if (op === 0) t = t.slice(0, at) + String.fromCharCode(rng.int(256)) + t.slice(at + 1)
        else if (op === 1) t = t.slice(0, at) + t.slice(at + 1)
        else t = t.slice(0, at) + String.fromCharCode(rng.int(256)) + t.slice(at)
      }
      text = t
      break
    }
    default: // garbage
      return { family, bytes: rng.bytes(rng.range(1, 300)), markers }
  }
  return { family, bytes: Buffer.from(text, 'latin1'), markers }
}

/** most headers a 'limits' case sends */
const LIMIT_HEADERS = 120
