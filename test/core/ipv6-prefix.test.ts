// The network an IPv6 address is counted by (core/net/ip.ts ipv6Prefix): the rate limits' key for IPv6 clients.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ipv6Prefix } from '../../core/net/ip.js'

test('ipv6Prefix: the leading bits, canonical text with the length; IPv4 and mapped addresses as they are', () => {
  assert.equal(ipv6Prefix('2001:db8:1:2:ffff:1:2:3', 64), '2001:db8:1:2::/64')
  assert.equal(ipv6Prefix('2001:db8:1:2::1', 64), ipv6Prefix('2001:db8:1:2:aaaa::9', 64))
  assert.equal(ipv6Prefix('2001:db8:1:2::1', 56), '2001:db8:1::/56')
  assert.equal(ipv6Prefix('2001:db8:1:2ff::1', 60), '2001:db8:1:2f0::/60', 'a length inside a byte keeps its leading bits')
  assert.equal(ipv6Prefix('2001:db8::1', 128), '2001:db8::1')
  assert.equal(ipv6Prefix('198.51.100.7', 64), '198.51.100.7')
  assert.equal(ipv6Prefix('::ffff:198.51.100.7', 64), '::ffff:198.51.100.7')
})
