// The one door for plugins: package.json exports this module as "lb/plugin",
// and every plugin, built-in (plugins/*.ts) or third-party, imports lb only
// through it. It gathers the contract (core/plugin.ts) and the helpers a
// plugin needs, so core modules can change behind it; a test
// (test/core/import-graph.test.ts) fails when a file under plugins/ imports
// core/ by any other way. lb hands this same module to third-party plugins
// however lb was installed (core/plugin-resolve.ts).
export * from './plugin.js'

// config validation: the Checker's readers and the helpers built-ins use
export { type Checker, type Table, HEADER_NAME, checkRealm, describe, join, parseDuration, parseSize, resolvePath } from './config/check.js'
// error lines in lb's format: "LB_ERR_X: message" (codes in core/errors.ts, ERRORS.md)
export { type ErrorCode, formatError } from './errors.js'
// the coarse clock: ms since the epoch, updated every CLOCK_MS; cheaper than Date.now() per request
export { CLOCK_MS, now } from './clock.js'
export type { Logger } from './log.js'
export type { Shm } from './shm/layout.js'
export type { Ctx, Reply } from './worker/request/context.js'
// response filters: a ClientResponse wrapper that sees the head, body and lb's own answers (errors, buffering, contentType)
export { type FilterFactory, type FilterHost, type Page, ClientFilter } from './worker/request/client-filter.js'
export type { ClientResponse } from './worker/transport/client.js'
// regexps in Go's syntax on a linear-time engine, and Go's replacement templates ($1, ${name})
export { expandGo, linearRegExp, replaceAllGo } from './config/rules/linear-regexp.js'
// the gRPC-Web mode of a content-type (0 none, 1 binary, 2 base64 text), for Ctx.grpcWeb
export { grpcWebMode } from './worker/proxy/grpc-web.js'
// a new path for the request, held to the client's path rules (400 when it breaks them)
export { rewritePath } from './worker/request/path-rewrite.js'
// the shared rate table (env.shm): new RateTable(env.shm.i32); key your entries with your own seeds
export { ASK_LEASE, KeyHasher, type KeySpace, MILLI, RateTable, fmix32, keyA, keyB, keySpace } from './shm/rate-table.js'
// the cluster-wide rate table ([cluster] only): pass its `cx` to RateTable.window
export { type ClusterTable, clusterDown, clusterTable, countClusterRefusal, countUnavailable, LEASE_ROUND_MS, LEASE_WAIT_MS, leaseRounds, nextLeaseRound } from './shm/cluster-table.js'
// what a rate limit tells `show table` and the config API about its entries
export type { LimitTable } from './shm/rate-entries.js'
// revoked sessions, shared by every worker (and, through env.shareRevocation, by every node): a logout's entry
export { type Revocation, ADDED, KEPT, REDUNDANT, RESET, Revocations, revocationKey, unixNow } from './shm/revocations.js'
// the shared counters: totals over every worker's stripe (ids in core/shm/layout.ts)
export { sumGlobal, sumServer } from './shm/counters.js'
// authentication: htpasswd entries and a bounded cache of verdicts
export { type HtpasswdEntry, parseEntry } from './auth/htpasswd.js'
export { PasswordTable } from './auth/password-table.js'
export { VerdictCache } from './auth/verdict-cache.js'
// a claim as a header value (jwt, oidc forward claims upstream)
export { claimHeaderValue } from './auth/claim-header.js'
// client addresses: IP and CIDR parsing, allow lists, the client address behind trusted proxies
export { type Cidr, allowList, canonicalIp, cidrContains, ipv6Prefix, parseCidr, parseIp } from './net/ip.js'
export { type SourceConf, type SourceOf, SOURCE_KEYS, checkCidrs, checkSource, compileCidrs, compileSource } from './net/source.js'
