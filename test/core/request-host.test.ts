// Host validation (core/worker/request/request-host.ts) on its own: RFC 9112 §3.2 and
// the RFC 3986 host syntax, and the trailing dot of a fully qualified name.
import { strict as assert } from 'node:assert'
import { describe, test } from 'node:test'
import { parseRule } from '../../core/config/rules/rule.js'
import { Ctx } from '../../core/worker/request/context.js'
import { checkHost, hostProblem } from '../../core/worker/request/request-host.js'

function ctxWith (...hosts: string[]): Ctx {
  const ctx = new Ctx()
  ctx.headers.push('user-agent', 'test')
  for (const h of hosts) ctx.headers.push('host', h)
  // as request-host.ts leaves it: the last value, port dropped, lower case
  const v = hosts.at(-1) ?? ''
  const colon = v.lastIndexOf(':')
  ctx.host = (colon > 0 && v.indexOf(']') < colon ? v.slice(0, colon) : v).toLowerCase()
  return ctx
}

describe('Host values', () => {
  test('valid hosts', () => {
    for (const v of ['example.com', 'Example.COM.', 'a', 'localhost:8080', '127.0.0.1', '127.0.0.1:80', '[::1]', '[::1]:8443',
      '[2001:db8::1]', '[::ffff:10.0.0.1]:1', 'xn--caf-dma.example', 'a_b-c~d', 'a:', 'h:65535', '.example.com', "a!$&'()*+,;=b"]) {
      assert.equal(hostProblem(v), '', v)
    }
  })

  test('invalid hosts, each with its reason', () => {
    const cases: Array<[string, string]> = [
      ['', 'empty'],
      ['evil.com/x', '"/" is not allowed in a host name'],
      ['good evil', 'a space is not allowed in a host name'],
      ['exé.com', 'non-ASCII character U+00E9 is not allowed in a host name'],
      ['a\tb', 'control character 0x09 is not allowed in a host name'],
      ['a\x7f', 'control character 0x7F is not allowed in a host name'],
      ['evil.com\\x', '"\\\\" is not allowed in a host name'],
      ['evil.com?x', '"?" is not allowed in a host name'],
      ['evil.com#x', '"#" is not allowed in a host name'],
      ['user@evil.com', '"@" is not allowed in a host name'],
      ['a%2fb', 'percent-encoded host names are not accepted'],
      ['a..b', 'empty label ("..")'],
      ['.', 'empty host name'],
      [':80', 'empty host name'],
      ['a:80/x', 'port "80/x" is not a number up to 65535'],
      ['a:80:81', 'port "80:81" is not a number up to 65535'],
      ['a:65536', 'port "65536" is not a number up to 65535'],
      ['a:123456', 'port "123456" is not a number up to 65535'],
      ['[::1', 'not a valid IPv6 literal'],
      ['[evil.com]', 'not a valid IPv6 literal'],
      ['[::1]x', 'text after the IPv6 literal'],
      ['[::1]:8x', 'port "8x" is not a number up to 65535'],
    ]
    for (const [v, why] of cases) assert.equal(hostProblem(v), why, JSON.stringify(v))
  })

  test('checkHost: a valid Host is required; the trailing dot is dropped from ctx.host', () => {
    assert.equal(checkHost(ctxWith()), 'no Host header (HTTP/1.1 requires one)')
    assert.equal(checkHost(ctxWith('evil.com/x')), 'invalid Host header: "/" is not allowed in a host name')
    const fq = ctxWith('Example.COM.:8080')
    assert.equal(checkHost(fq), '')
    assert.equal(fq.host, 'example.com')
    // the same value again takes the remembered path and still drops the dot
    const again = ctxWith('Example.COM.:8080')
    assert.equal(checkHost(again), '')
    assert.equal(again.host, 'example.com')
    const v6 = ctxWith('[::1]:80')
    assert.equal(checkHost(v6), '')
    assert.equal(v6.host, '[::1]')
    // a valid value remembered does not make the next invalid one pass
    assert.equal(checkHost(ctxWith('')), 'invalid Host header: empty')
  })

  test('Host() rule values lose their trailing dot as request hosts do', () => {
    assert.deepEqual(parseRule('Host(`Example.COM.`, `b.example`)'), { op: 'host', values: ['example.com', 'b.example'] })
  })
})
