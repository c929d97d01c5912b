// The Lua script of the generation budgets' leases (core/gen/budget/lease.ts),
// one round trip for every consumer a round asks for. Times are Redis's own
// clock (TIME), so nodes whose clocks differ still agree on which node is
// stale.
//
// Keys (under [cluster] prefix), one pair per keyed consumer and window:
//   <prefix>gl:m:<UTC minute>:<consumer>  hash: node → "<rpm lease>:<requests>:<tpm lease>:<tokens>:<ms stale>"
//   <prefix>gl:d:<UTC day>:<consumer>     hash: node → "<tpd lease>:<tokens>:<ms stale>"
// A node's "requests" and "tokens" are what it admitted in the window (tokens:
// charged plus reserved by its requests in flight). A stale node (no round
// within node_ttl: stopped or cut off) keeps what it used, not its lease: the
// window's use stays counted, its unused lease goes back to the others.

/** The window keys of a consumer: the minute's (rpm, tpm) and the day's (tpd). */
export const minuteKey = (prefix: string, minute: number, consumer: string): string => `${prefix}gl:m:${minute}:${consumer}`
export const dayKey = (prefix: string, day: number, consumer: string): string => `${prefix}gl:d:${day}:${consumer}`

/** Numbers per consumer in ARGV: for each of rpm, tpm, tpd its limit, floor, want and used; then the two keys' ttl ms. */
export const ARGS_PER_CONSUMER = 14
/** Numbers per consumer in the reply: for each of rpm, tpm, tpd the grant and the other nodes' use. */
export const OUT_PER_CONSUMER = 6

/**
 * KEYS two per consumer (its minute key, its day key); ARGV node, stale ms,
 * then ARGS_PER_CONSUMER numbers per consumer. For each limit (0: none, no
 * lease) the grant is max(floor, min(want, limit - what the other nodes hold)),
 * where a fresh node holds the larger of its lease and its use and a stale one
 * its use: never less than the node may already have admitted on (floor),
 * never more than the others leave, so the leases never sum past the limit.
 * Stores the grants and uses, returns OUT_PER_CONSUMER numbers per consumer.
 */
export const BUDGET_LEASE = `
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local node = ARGV[1]
local stale = tonumber(ARGV[2])
local function int (x) return string.format('%.0f', x) end
-- the other nodes' hold and use of dimension d (1 or 2) of key k whose values have n dimensions
local function others (all, d, n)
  local hold, used = 0, 0
  for j = 1, #all, 2 do
    if all[j] ~= node then
      local f = {}
      for x in string.gmatch(all[j + 1], '[^:]+') do f[#f + 1] = tonumber(x) end
      if #f == 2 * n + 1 then
        local l, u = f[2 * d - 1], f[2 * d]
        if f[2 * n + 1] > ms then hold = hold + math.max(l, u) else hold = hold + u end
        used = used + u
      end
    end
  end
  return hold, used
end
local out = {}
for i = 1, #KEYS / 2 do
  local b = 2 + ${ARGS_PER_CONSUMER} * (i - 1)
  local fields = {}
  for w = 1, 2 do
    local k = KEYS[2 * i - 2 + w]
    local all = redis.call('HGETALL', k)
    local dims = w == 1 and { 0, 1 } or { 2 }
    local value = {}
    for di, d in ipairs(dims) do
      local a = b + 4 * d
      local limit, floor, want, used = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
      local hold, oused = others(all, di, #dims)
      local grant = 0
      if limit > 0 then grant = math.max(floor, math.min(want, limit - hold)) end
      out[${OUT_PER_CONSUMER} * (i - 1) + 2 * d + 1] = grant
      out[${OUT_PER_CONSUMER} * (i - 1) + 2 * d + 2] = oused
      value[#value + 1] = int(grant) .. ':' .. int(used)
    end
    redis.call('HSET', k, node, table.concat(value, ':') .. ':' .. int(ms + stale))
    redis.call('PEXPIRE', k, ARGV[b + 12 + w])
  end
end
return out`
