// The network an IPv6 address is counted by (core/net/ip.ts ipv6Prefix): the rate limits' key for IPv6 clients;
// and the allow lists' allocation-free reader of IPv6 text (ipv6Into).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ipv6Into, ipv6Prefix, parseIp } from '../../core/net/ip.js'

test('ipv6Prefix: the leading bits, canonical text with the length; IPv4 and mapped addresses as they are', () => {
  assert.equal(ipv6Prefix('2001:db8:1:2:ffff:1:2:3', 64), '2001:db8:1:2::/64')
  assert.equal(ipv6Prefix('2001:db8:1:2::1', 64), ipv6Prefix('2001:db8:1:2:aaaa::9', 64))
  assert.equal(ipv6Prefix('2001:db8:1:2::1', 56), '2001:db8:1::/56')
  assert.equal(ipv6Prefix('2001:db8:1:2ff::1', 60), '2001:db8:1:2f0::/60', 'a length inside a byte keeps its leading bits')
  assert.equal(ipv6Prefix('2001:db8::1', 128), '2001:db8::1')
  assert.equal(ipv6Prefix('198.51.100.7', 64), '198.51.100.7')
  assert.equal(ipv6Prefix('::ffff:198.51.100.7', 64), '::ffff:198.51.100.7')
})

test('ipv6Into (the allow lists\' per-request reader) reads what parseIp reads, without allocating', () => {
  const out = new Uint8Array(16)
  const good = ['::', '::1', '1::', '1:2:3:4:5:6:7:8', 'fe80::1', '2001:db8::8a2e:370:7334', '::ffff:1.2.3.4',
    '::ffff:255.255.255.255', '1:2:3:4:5:6:1.2.3.4', '1::2:3', 'abcd:EF01::', '::1.2.3.4', '1:2:3:4:5:6:7::', '::2:3:4:5:6:7:8']
  for (const s of good) {
    out.fill(0xaa)
    assert.equal(ipv6Into(s, out), true, s)
    assert.deepEqual([...out], [...parseIp(s)!], s)
  }
  for (const s of [':1', '1:', '1:::2', '1::2::3', '12345::', '1:2:3:4:5:6:7:8:9', '::1.2.3', 'g::', '1.2.3.4', '::1.2.3.256', '']) {
    assert.equal(ipv6Into(s, out), false, s)
  }
})
