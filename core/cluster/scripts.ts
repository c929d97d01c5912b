// The Lua scripts of a cluster, one round trip each. Times are Redis's own
// clock (TIME), so nodes whose clocks differ still agree on expiries.
//
// Keys (all under [cluster] prefix):
//   <prefix>nodes          sorted set: node name → ms its heartbeat expires
//   <prefix>rl:<hex key>   hash: node name → for a sliding window "<its lease>:<its window
//                          estimate>:<ms it goes stale>", for a bucket "<its capacity lease>:<its
//                          rate lease>:<its level>:<ms it goes stale>"

import { createHash } from 'node:crypto'
import type { Redis } from './redis.js'

const NOW = "local t = redis.call('TIME') local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"

/**
 * KEYS[1] the nodes set; ARGV node, ttl ms. Renews this node, drops the
 * expired ones, returns the live names.
 */
export const HEARTBEAT = NOW + `
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
return redis.call('ZRANGE', KEYS[1], 0, -1)`

/**
 * KEYS the rate keys; ARGV node, stale ms, then for each key its estimate and
 * its key ttl ms. Stores this node's estimate (0 removes it), drops other
 * nodes' stale ones, returns for each key the sum of the other nodes' estimates.
 * Since the leases, only withdrawals use it (estimate 0: core/cluster/rate-sync.ts).
 */
export const RATE_SYNC = NOW + `
local node = ARGV[1]
local stale = tonumber(ARGV[2])
local out = {}
for i, k in ipairs(KEYS) do
  local est = tonumber(ARGV[1 + 2 * i])
  if est > 0 then redis.call('HSET', k, node, est .. ':' .. (ms + stale)) else redis.call('HDEL', k, node) end
  local all = redis.call('HGETALL', k)
  local sum = 0
  for j = 1, #all, 2 do
    if all[j] ~= node then
      local v, x = string.match(all[j + 1], '^(%d+):.-(%d+)$')
      if x ~= nil and tonumber(x) > ms then sum = sum + tonumber(v) else redis.call('HDEL', k, all[j]) end
    end
  end
  if #all > 0 then redis.call('PEXPIRE', k, ARGV[2 + 2 * i]) end
  out[i] = sum
end
return out`

/**
 * Leases of sliding windows (core/cluster/rate-lease.ts). KEYS the rate keys;
 * ARGV node, stale ms, then for each key: floor (what this node may already
 * have admitted under: it keeps at least that), want (the lease it asks for),
 * its window estimate, the limit, the key's ttl ms. Drops other nodes' stale
 * entries and grants max(floor, min(want, limit - the other nodes' leases)):
 * beyond what is already held, never more than the others leave, so the leases
 * never sum past the limit. Returns for each key the grant and the sum of the
 * other nodes' estimates (what `show table` reports as the cluster's count).
 */
export const RATE_LEASE = NOW + `
local node = ARGV[1]
local stale = tonumber(ARGV[2])
local out = {}
for i, k in ipairs(KEYS) do
  local b = 2 + 5 * (i - 1)
  local floor, want, est, limit = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
  local all = redis.call('HGETALL', k)
  local leases, ests = 0, 0
  for j = 1, #all, 2 do
    if all[j] ~= node then
      local l, e, x = string.match(all[j + 1], '^(%d+):(%d+):(%d+)$')
      if x ~= nil and tonumber(x) > ms then leases = leases + tonumber(l) ests = ests + tonumber(e) else redis.call('HDEL', k, all[j]) end
    end
  end
  local grant = math.max(floor, math.min(want, limit - leases))
  if grant > 0 or est > 0 then
    redis.call('HSET', k, node, grant .. ':' .. est .. ':' .. (ms + stale))
    redis.call('PEXPIRE', k, ARGV[b + 5])
  else
    redis.call('HDEL', k, node)
  end
  out[2 * i - 1] = grant
  out[2 * i] = ests
end
return out`

/** `<prefix>rl:<hex KEY_A><hex KEY_B>`: a source's Redis key, the same on every node. */
export function redisRateKey (prefix: string, ka: number, kb: number): string {
  const hex = (v: number): string => (v >>> 0).toString(16).padStart(8, '0')
  return `${prefix}rl:${hex(ka)}${hex(kb)}`
}

/**
 * KEYS[1] a source's rate key; ARGV channel, message. Forgets the source's
 * counts of every node and tells every node to forget its own (`clear table`).
 */
export const RATE_CLEAR = `
redis.call('DEL', KEYS[1])
return redis.call('PUBLISH', ARGV[1], ARGV[2])`

const shas = new Map<string, string>()

/** Runs a script by its SHA1 (EVALSHA), sending its text only when Redis does not have it yet (a restarted Redis). */
export async function runScript (redis: Redis, script: string, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
  let sha = shas.get(script)
  if (sha === undefined) shas.set(script, sha = createHash('sha1').update(script).digest('hex'))
  try {
    return await redis.evalsha(sha, keys.length, ...keys, ...args)
  } catch (err) {
    if (!(err as Error).message.startsWith('NOSCRIPT')) throw err
    return await redis.eval(script, keys.length, ...keys, ...args)
  }
}

/**
 * KEYS[1] the config hash; ARGV expected version, new version, state JSON,
 * node, channel. Compare-and-set of the cluster-wide config version: stores
 * and announces the new state when the stored version is still the expected
 * one (or there is none); returns 0, else the stored version.
 */
export const CONFIG_CAS = `
local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if v ~= 0 and v ~= tonumber(ARGV[1]) then return v end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'state', ARGV[3], 'node', ARGV[4])
redis.call('PUBLISH', ARGV[5], ARGV[2])
return 0`

/**
 * KEYS[1] the config hash; ARGV version, state JSON, node, channel. A node's
 * copy goes in when Redis holds none or an older one (Redis restarted empty):
 * the newest copy among the nodes wins. Returns the version stored before.
 */
export const CONFIG_SEED = `
local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if v < tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'version', ARGV[1], 'state', ARGV[2], 'node', ARGV[3])
  redis.call('PUBLISH', ARGV[4], ARGV[1])
end
return v`

/**
 * Session revocations (core/cluster/revocations.ts). KEYS[1] the revocations
 * (sorted set: "<key hex>:<at>" scored by the unix s it is over), KEYS[2] the
 * sequence; ARGV member, its end, channel, the message after its sequence
 * number. Drops the entries that are over, adds this one, announces it with
 * the next sequence number, returns that number.
 */
export const REVOKE = `
local t = redis.call('TIME')
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t[1])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
local seq = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[3], seq .. ARGV[4])
return seq`

/** KEYS[1] the epoch, KEYS[2] the sequence; ARGV epoch, channel, the message after its sequence number. Keeps the later epoch, announces it. */
export const REVOKE_EPOCH = `
if tonumber(ARGV[1]) > tonumber(redis.call('GET', KEYS[1]) or '0') then redis.call('SET', KEYS[1], ARGV[1]) end
local seq = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[2], seq .. ARGV[3])
return seq`

/**
 * KEYS[1] the revocations, KEYS[2] the sequence, KEYS[3] the epoch; ARGV the
 * epoch, then end and member of each entry. A node's entries into a Redis that
 * may have lost them (restarted empty, or never told while the node was cut
 * off); when one was new, the sequence moves so that the other nodes read it.
 * Returns the sequence.
 */
export const REVOKE_SEED = `
local moved = false
if tonumber(ARGV[1]) > tonumber(redis.call('GET', KEYS[3]) or '0') then redis.call('SET', KEYS[3], ARGV[1]) moved = true end
for i = 2, #ARGV, 2 do if redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then moved = true end end
if moved then return redis.call('INCR', KEYS[2]) end
return tonumber(redis.call('GET', KEYS[2]) or '0')`

/**
 * Leases of buckets (core/cluster/bucket-lease.ts). KEYS the rate keys; ARGV
 * node, stale ms, then for each key: capacity floor, capacity want (units),
 * its level (units), the capacity, rate floor (in RATE_PARTS, 1,000,000 = the
 * whole rate), the key's ttl ms. Drops other nodes' stale entries and grants
 * capacity max(floor, min(want, capacity - the other nodes' capacity leases))
 * and rate max(rate floor, min(its part of the levels, the whole rate - the
 * other nodes' rate leases)): beyond what is already held, never more than
 * the others leave, so neither part of the leases ever sums past the bucket's.
 * Returns for each key the capacity granted, the rate granted and the sum of
 * the other nodes' levels.
 */
export const BUCKET_LEASE = NOW + `
local node = ARGV[1]
local stale = tonumber(ARGV[2])
local parts = 1000000
local out = {}
for i, k in ipairs(KEYS) do
  local b = 2 + 6 * (i - 1)
  local floor, want, level, cap, rfloor = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5])
  local all = redis.call('HGETALL', k)
  local caps, rates, levels = 0, 0, 0
  for j = 1, #all, 2 do
    if all[j] ~= node then
      local c, r, l, x = string.match(all[j + 1], '^(%d+):(%d+):(%d+):(%d+)$')
      if x ~= nil and tonumber(x) > ms then
        caps = caps + tonumber(c) rates = rates + tonumber(r) levels = levels + tonumber(l)
      else
        redis.call('HDEL', k, all[j])
      end
    end
  end
  local grant = math.max(floor, math.min(want, cap - caps))
  local part = 0
  if level + levels > 0 then part = math.floor(parts * level / (level + levels)) end
  local rate = math.max(rfloor, math.min(part, parts - rates))
  if grant > 0 or rate > 0 or level > 0 then
    redis.call('HSET', k, node, grant .. ':' .. rate .. ':' .. level .. ':' .. (ms + stale))
    redis.call('PEXPIRE', k, ARGV[b + 6])
  else
    redis.call('HDEL', k, node)
  end
  out[3 * i - 2] = grant
  out[3 * i - 1] = rate
  out[3 * i] = levels
end
return out`
