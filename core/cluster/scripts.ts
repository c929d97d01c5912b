// The Lua scripts of a cluster, one round trip each. Times are Redis's own
// clock (TIME), so nodes whose clocks differ still agree on expiries.
//
// Keys (all under [cluster] prefix):
//   <prefix>nodes          sorted set: node name → ms its heartbeat expires
//   <prefix>rl:<hex key>   hash: node name → "<its window estimate>:<ms it goes stale>"

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
      local v = all[j + 1]
      local c = string.find(v, ':', 1, true)
      if c ~= nil and tonumber(string.sub(v, c + 1)) > ms then sum = sum + tonumber(string.sub(v, 1, c - 1)) else redis.call('HDEL', k, all[j]) end
    end
  end
  if #all > 0 then redis.call('PEXPIRE', k, ARGV[2 + 2 * i]) end
  out[i] = sum
end
return out`

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
