// The request-path normaliser (core/worker/request/request-path.ts) on its own: RFC 3986
// §6.2.2 normalisation, the refused characters and escapes, and each option.
import { strict as assert } from 'node:assert'
import { describe, test } from 'node:test'
import { ENCODED_CHARACTER_KEYS, type EncodedCharactersConf } from '../../core/config/static.js'
import { parseConfig } from '../../core/configure.js'
import { DEFAULT_POLICY, PathRefused, compilePathPolicy, isNormalPath, normalizePath } from '../../core/worker/request/request-path.js'

const NO_ESCAPES: EncodedCharactersConf = { slash: false, backSlash: false, nullCharacter: false, semicolon: false, percent: false, questionMark: false, hash: false }

function norm (p: string, policy = DEFAULT_POLICY): string {
  const r = normalizePath(p, policy)
  return typeof r === 'string' ? r : `REFUSED: ${r.reason}`
}

describe('request path normalisation', () => {
  test('normal paths are returned as they are, found so by the fast scan', () => {
    for (const p of ['/', '/index.html', '/api/v1/users?', '/a/b/', '/.well-known/x', '/a/.hidden', '/a/..b', '/a/b..', '/a;b=c', "/a-b_c~d!$&'()*+,=:@"]) {
      assert.equal(isNormalPath(p, true), true, p)
      assert.equal(normalizePath(p, DEFAULT_POLICY), p, p)
    }
  })

  test('dot segments are removed (RFC 3986 §5.2.4)', () => {
    const cases: Array<[string, string]> = [
      ['/x/../private/secret.txt', '/private/secret.txt'],
      ['/./private/secret.txt', '/private/secret.txt'],
      ['/api/../secret', '/secret'],
      ['/a/b/c/./../../g', '/a/g'],
      ['/a/.', '/a/'],
      ['/a/..', '/'],
      ['/a/b/..', '/a/'],
      ['/.', '/'],
      ['/a/./', '/a/'],
      ['/a/../b/../c', '/c'],
      ['/mid/content=5/../6', '/mid/6'],
    ]
    for (const [p, want] of cases) assert.equal(norm(p), want, p)
  })

  test('a ".." above the root is refused', () => {
    for (const p of ['/..', '/../x', '/a/../..', '/a/../../b', '/%2e%2e/x', '/.%2E/x', '//..']) {
      assert.equal(norm(p), 'REFUSED: ".." above the root', p)
    }
  })

  test('escapes of unreserved characters are decoded, others upper-cased', () => {
    const cases: Array<[string, string]> = [
      ['/%70rivate/secret.txt', '/private/secret.txt'],
      ['/%7Euser/%41%7a%30%2D%2e%5F', '/~user/Az0-._'],
      ['/a%20b', '/a%20b'],
      ['/caf%c3%a9', '/caf%C3%A9'],
      ['/%2e%2e/%2E/x/%2e%2e/y', 'REFUSED: ".." above the root'],
      ['/a/%2e%2e/b', '/b'],
      ['/a/%2e/b', '/a/b'],
      ['/a%2fb', 'REFUSED: encoded "/" (%2F) is not allowed'],
      ['/%3c%3E', '/%3C%3E'],
      ['/a/%2e%2e%2fb', 'REFUSED: encoded "/" (%2F) is not allowed'],
    ]
    for (const [p, want] of cases) assert.equal(norm(p), want, p)
  })

  test('repeated slashes are merged by default, kept when merge_slashes is off', () => {
    assert.equal(norm('//private/secret.txt'), '/private/secret.txt')
    assert.equal(norm('/a//b///c//'), '/a/b/c/')
    assert.equal(norm('//'), '/')
    assert.equal(norm('/a//../b'), '/b')
    const keep = compilePathPolicy({ mergeSlashes: false, allowEncoded: NO_ESCAPES })
    assert.equal(isNormalPath('//private/secret.txt', false), true)
    assert.equal(norm('//private/secret.txt', keep), '//private/secret.txt')
    assert.equal(norm('/a//b/./c', keep), '/a//b/c')
    assert.equal(norm('/a//../b', keep), '/a/b') // ".." removes the empty segment, as RFC 3986 §5.2.4
    assert.equal(norm('/a//..', keep), '/a/')
  })

  test('each ambiguous escape is refused by default, naming it, and kept encoded when its option allows it', () => {
    const cases: Array<[keyof EncodedCharactersConf, string, string]> = [
      ['slash', '%2f', 'encoded "/" (%2F)'],
      ['backSlash', '%5c', 'encoded backslash (%5C)'],
      ['nullCharacter', '%00', 'encoded NUL (%00)'],
      ['semicolon', '%3b', 'encoded ";" (%3B)'],
      ['percent', '%25', 'encoded "%" (%25)'],
      ['questionMark', '%3F', 'encoded "?" (%3F)'],
      ['hash', '%23', 'encoded "#" (%23)'],
    ]
    for (const [field, esc, name] of cases) {
      assert.equal(norm(`/a${esc}b`), `REFUSED: ${name} is not allowed`, esc)
      const one = compilePathPolicy({ mergeSlashes: true, allowEncoded: { ...NO_ESCAPES, [field]: true } })
      assert.equal(norm(`/a${esc}b/./c`, one), `/a${esc.toUpperCase()}b/c`, `${esc} allowed by ${ENCODED_CHARACTER_KEYS[field]}`)
      // the others stay refused
      for (const [other, oesc] of cases) if (other !== field) assert.match(norm(`/a${oesc}`, one), /^REFUSED/, `${oesc} with only ${field}`)
    }
  })

  test('an allowed %2F never splits a segment, so it cannot hide a ".."', () => {
    const slash = compilePathPolicy({ mergeSlashes: true, allowEncoded: { ...NO_ESCAPES, slash: true } })
    assert.equal(norm('/a/..%2Fprivate', slash), '/a/..%2Fprivate')
    assert.equal(norm('/%2e%2e%2fprivate', slash), '/..%2Fprivate')
  })

  test('raw control characters, space, backslash, "#" and non-ASCII are refused, naming them', () => {
    const cases: Array<[string, string]> = [
      ['/a\x00b', 'control character 0x00'],
      ['/a\x01', 'control character 0x01'],
      ['/a\tb', 'control character 0x09'],
      ['/a\x7fb', 'control character 0x7F'],
      ['/a b', 'space'],
      ['/a\\b', 'backslash ("\\")'],
      ['/..\\private', 'backslash ("\\")'],
      ['/private/secret.txt#/../..', '"#" (a fragment is never sent to a server)'],
      ['/café', 'non-ASCII character U+00E9 (send it percent-encoded)'],
      ['/x\ufffd', 'non-ASCII character U+FFFD (send it percent-encoded)'],
    ]
    for (const [p, why] of cases) {
      assert.equal(isNormalPath(p, true), false, p)
      assert.equal(norm(p), `REFUSED: ${why}`, JSON.stringify(p))
    }
  })

  test('malformed escapes and paths not starting with "/" are refused', () => {
    assert.equal(norm('/a%zzb'), 'REFUSED: malformed percent-encoding "%zz"')
    assert.equal(norm('/a%4'), 'REFUSED: malformed percent-encoding "%4"')
    assert.equal(norm('/a%'), 'REFUSED: malformed percent-encoding "%"')
    assert.equal(norm('/a%g1'), 'REFUSED: malformed percent-encoding "%g1"')
    assert.equal(norm(''), 'REFUSED: the path must start with "/"')
    assert.equal(norm('a/b'), 'REFUSED: the path must start with "/"')
    assert.ok(normalizePath('*', DEFAULT_POLICY) instanceof PathRefused)
  })

  test('a dot segment with ";" parameters is refused: servlet containers strip them, then resolve the "..", past a PathPrefix or a skip path', () => {
    for (const [p, seg] of [['/health/..;/admin', '..;'], ['/health/.%2e;/admin', '..;'], ['/a/..;x=1/b', '..;x=1'], ['/a/.;/b', '.;'], ['/a/..;', '..;']]) {
      assert.equal(isNormalPath(p!, true), false, p)
      assert.equal(norm(p!), `REFUSED: a dot segment with parameters ${JSON.stringify(seg)}`, p)
    }
    // ";" elsewhere is an ordinary byte of a segment name
    for (const p of ['/a;b/c', '/a/b;jsessionid=1', '/a/...;/b', '/a/x..;/b']) assert.equal(norm(p), p)
  })

  test('normalising is idempotent', () => {
    for (const p of ['/x/../a//b/./%7e%41/%c3%a9', '/a/b/../../c/', '//%2E/x/']) {
      const once = norm(p)
      assert.equal(norm(once), once, p)
    }
  })
})

describe('request path config', () => {
  const ep = (extra: string): string => `[entrypoints.web]\naddress = "127.0.0.1:8080"\n${extra}`

  test('defaults: merge slashes, every ambiguous escape refused', () => {
    const rp = parseConfig(ep('')).entrypoints[0]!.requestPath
    assert.deepEqual(rp, { mergeSlashes: true, allowEncoded: NO_ESCAPES })
    assert.ok(Object.isFrozen(rp.allowEncoded))
  })

  test('each option is read from its key', () => {
    const keys = Object.values(ENCODED_CHARACTER_KEYS).map((k) => `${k} = true`).join('\n')
    const rp = parseConfig(ep(`merge_slashes = false\n[entrypoints.web.encoded_characters]\n${keys}`)).entrypoints[0]!.requestPath
    assert.equal(rp.mergeSlashes, false)
    assert.ok(Object.values(rp.allowEncoded).every((v) => v === true))
  })

  test('wrong types, unknown keys and tcp entry points are reported', () => {
    assert.throws(() => parseConfig(ep('merge_slashes = "yes"\n[entrypoints.web.encoded_characters]\nallow_encoded_slash = 1\nallow_slash = true')), (err: Error) => {
      assert.match(err.message, /entrypoints\.web\.merge_slashes: expected true or false, found "yes"/)
      assert.match(err.message, /entrypoints\.web\.encoded_characters\.allow_encoded_slash: expected true or false, found number 1/)
      assert.match(err.message, /entrypoints\.web\.encoded_characters\.allow_slash: unknown key \(allowed: allow_encoded_slash, /)
      return true
    })
    assert.throws(() => parseConfig(`[entrypoints.pg]\naddress = "127.0.0.1:5432"\nprotocol = "tcp"\nservice = "pg"\nmerge_slashes = false
[services.pg]\n[[services.pg.servers]]\naddress = "127.0.0.1:5433"`), /entrypoints\.pg\.merge_slashes: only for protocol = "http" or "https"/)
  })
})
