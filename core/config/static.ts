// [global], [timeouts], [limits] and [entrypoints]. What a reload (SIGHUP, the
// config API) does with them, as core/main.ts applies it:
// - [global] and [entrypoints] are static: a reload that changes them warns
//   "these sections need a restart" and the running values stay (workers,
//   addresses, protocols, state_dir, plugins_dir, log level, access log...).
//   The files an https entry point names are the exception: every reload
//   re-reads them, and changed certificates are served from then on.
// - [timeouts] and [limits] reload: each worker's new generation uses them for
//   the requests it accepts from then on.
// ([admin], [dashboard], [runtime_socket] and [generation] are static too;
// routers, services and middlewares, in dynamic.ts, all reload.)
import { availableParallelism } from 'node:os'
import { type Checker, type Table, join, resolvePath } from './check.js'
import { parseListenAddress } from './host-port.js'
import { DEFAULTS } from './defaults.js'
import type { ServiceConf } from './dynamic.js'
import { type TlsConf, checkTls } from './tls.js'
import { type Http2Conf, checkHttp2 } from './http2.js'
import { LEVELS, type Level } from '../log.js'
import { type CapacityLimits, MAX_CAPACITY } from './capacity.js'

export interface GlobalConf {
  readonly workers: number
  readonly maxConnections: number
  readonly logLevel: Level
  /** 'stdout', 'off' or an absolute file path */
  readonly accessLog: string
  /** absolute path of the runtime state folder */
  readonly stateDir: string
  readonly drainTimeoutMs: number
  /** absolute path of a folder searched for plugin packages after the config's own folder; '' = none */
  readonly pluginsDir: string
}

export interface TimeoutsConf {
  readonly connectMs: number
  readonly clientMs: number
  readonly serverMs: number
  readonly keepAliveMs: number
  /** client connections without a complete request head are closed after this (whole seconds, 1-960) */
  readonly headerMs: number
  /** idle client connections between requests, and clients reading nothing of a response, are closed after this (whole seconds, 1-960) */
  readonly clientKeepAliveMs: number
  /** WebSocket and TCP sessions: idle time (no byte either way) before they are closed */
  readonly tunnelMs: number
}

export interface LimitsConf extends CapacityLimits {
  readonly maxBodyBytes: number
  /** bytes of a request head, request line included; uWS's own limit is set from it at start (loadUws in core/worker/transport/uws/native.ts) */
  readonly maxHeaderBytes: number
  /** entries of the shared session revocation table (core/shm/revocations.ts), sized at start */
  readonly sessionRevocations: number
}

/** bounds of limits.session_revocations: a table of 16 B entries, 1 KiB to 64 MiB */
export const SESSION_REVOCATIONS = { min: 64, max: 4_194_304 } as const

/** bounds of limits.max_header_bytes: uWS's default and a head no client sends (uWS keeps a partial head in memory) */
export const MAX_HEADER_BYTES = { min: 4 * 1024, max: 1024 * 1024 } as const

/** http and https: routers, middlewares, WebSocket; h2c: HTTP/2 with prior knowledge, routers and middlewares; tcp: raw TCP to one service (core/worker/proxy/tcp-proxy.ts) */
export const PROTOCOLS = ['http', 'https', 'tcp', 'h2c'] as const
export type Protocol = typeof PROTOCOLS[number]
/** what parses and answers an http/https entry point's requests: uWebSockets.js, or Node's own HTTP/1.1 parser (core/worker/transport/node/engine.ts) */
export const ENGINES = ['uws', 'node'] as const
export type Engine = typeof ENGINES[number]
export interface EntryPointConf {
  readonly name: string
  readonly host: string
  readonly port: number
  readonly protocol: Protocol
  /** https: certificates and TLS settings; null for http and tcp */
  readonly tls: TlsConf | null
  /** tcp: the proxy service connections go to; '' for http and https */
  readonly service: string
  /** http and https: largest WebSocket message a client may send, bytes */
  readonly wsMaxMessage: number
  /** http and https: how request paths are normalised and which escapes they may hold */
  readonly requestPath: RequestPathConf
  /** http and https: the path lb answers itself (GET/HEAD 200 "OK"); '' = off (also for tcp) */
  readonly health: string
  /** http and https: the HTTP engine ("uws" for tcp) */
  readonly engine: Engine
  /** HTTP/2 to clients: https (ALPN h2 when enabled) and h2c (always) */
  readonly http2: Http2Conf
}

/** Escapes a path may keep (each refused with 400 unless allowed), Traefik's encodedCharacters. */
export interface EncodedCharactersConf {
  readonly slash: boolean
  readonly backSlash: boolean
  readonly nullCharacter: boolean
  readonly semicolon: boolean
  readonly percent: boolean
  readonly questionMark: boolean
  readonly hash: boolean
}

export interface RequestPathConf {
  /** merge repeated slashes before routing */
  readonly mergeSlashes: boolean
  readonly allowEncoded: EncodedCharactersConf
}

/** TOML key under [entrypoints.X.encoded_characters] of each EncodedCharactersConf field (Traefik's names, snake case). */
export const ENCODED_CHARACTER_KEYS = {
  slash: 'allow_encoded_slash',
  backSlash: 'allow_encoded_back_slash',
  nullCharacter: 'allow_encoded_null_character',
  semicolon: 'allow_encoded_semicolon',
  percent: 'allow_encoded_percent',
  questionMark: 'allow_encoded_question_mark',
  hash: 'allow_encoded_hash',
} as const satisfies Record<keyof EncodedCharactersConf, string>

function checkRequestPath (c: Checker, t: Table, p: string): RequestPathConf {
  const d = DEFAULTS.requestPath
  const ep = join(p, 'encoded_characters')
  const e = c.table(t.encoded_characters, ep, Object.values(ENCODED_CHARACTER_KEYS))
  const allow = {} as Record<keyof EncodedCharactersConf, boolean>
  for (const [field, key] of Object.entries(ENCODED_CHARACTER_KEYS) as Array<[keyof EncodedCharactersConf, string]>) {
    allow[field] = c.bool(e, key, ep, d.allowEncoded[field])
  }
  return { mergeSlashes: c.bool(t, 'merge_slashes', p, d.mergeSlashes), allowEncoded: allow }
}

export { type HostPort, formatHostPort, parseHostPort } from './host-port.js'

export function checkGlobal (c: Checker, raw: unknown, baseDir: string): GlobalConf {
  const p = 'global'
  const t = c.table(raw, p, ['workers', 'max_connections', 'log_level', 'access_log', 'state_dir', 'drain_timeout', 'plugins_dir'])
  const d = DEFAULTS.global
  let workers = availableParallelism()
  if (t.workers !== undefined && t.workers !== 'auto') workers = c.int(t, 'workers', p, workers, 1, 256)
  const accessLog = c.string(t, 'access_log', p, d.accessLog)
  const pluginsDir = c.string(t, 'plugins_dir', p, d.pluginsDir)
  return {
    workers,
    maxConnections: c.int(t, 'max_connections', p, d.maxConnections, 1, 10_000_000),
    logLevel: c.oneOf(t, 'log_level', p, LEVELS, d.logLevel),
    accessLog: accessLog === 'stdout' || accessLog === 'off' ? accessLog : resolvePath(baseDir, accessLog),
    stateDir: resolvePath(baseDir, c.string(t, 'state_dir', p, d.stateDir)),
    drainTimeoutMs: c.duration(t, 'drain_timeout', p, d.drainTimeoutMs),
    pluginsDir: pluginsDir === '' ? '' : resolvePath(baseDir, pluginsDir),
  }
}

export function checkTimeouts (c: Checker, raw: unknown): TimeoutsConf {
  const p = 'timeouts'
  const t = c.table(raw, p, ['connect', 'client', 'server', 'keep_alive', 'tunnel', 'header', 'client_keep_alive'])
  const d = DEFAULTS.timeouts
  // uWS counts these in whole seconds up to 960 (a larger value wraps round to a few seconds)
  const uwsSeconds = (key: string, def: number): number => Math.ceil(c.duration(t, key, p, def, 1_000, 960_000) / 1000) * 1000
  return {
    connectMs: c.duration(t, 'connect', p, d.connectMs, 1),
    clientMs: c.duration(t, 'client', p, d.clientMs, 1),
    serverMs: c.duration(t, 'server', p, d.serverMs, 1),
    keepAliveMs: c.duration(t, 'keep_alive', p, d.keepAliveMs, 1),
    tunnelMs: c.duration(t, 'tunnel', p, d.tunnelMs, 100),
    headerMs: uwsSeconds('header', d.headerMs),
    clientKeepAliveMs: uwsSeconds('client_keep_alive', d.clientKeepAliveMs),
  }
}

export function checkLimits (c: Checker, raw: unknown): LimitsConf {
  const t = c.table(raw, 'limits', ['max_body', 'max_header_bytes', 'services', 'servers', 'routers', 'session_revocations'])
  // a capacity: a number, or "auto" (0) to choose from the configuration at start (core/config/capacity.ts)
  const cap = (key: string): number => {
    if (t[key] === 'auto' || t[key] === undefined) return 0
    if (typeof t[key] === 'string') c.problem(join('limits', key), `"auto" or an integer from 1 to ${MAX_CAPACITY}`, t[key])
    return typeof t[key] === 'string' ? 0 : c.int(t, key, 'limits', 0, 1, MAX_CAPACITY)
  }
  let maxHeaderBytes = c.size(t, 'max_header_bytes', 'limits', DEFAULTS.limits.maxHeaderBytes)
  if (maxHeaderBytes < MAX_HEADER_BYTES.min || maxHeaderBytes > MAX_HEADER_BYTES.max) {
    c.problem(join('limits', 'max_header_bytes'), 'a size from "4k" to "1M"', t.max_header_bytes)
    maxHeaderBytes = DEFAULTS.limits.maxHeaderBytes
  }
  return {
    maxBodyBytes: c.size(t, 'max_body', 'limits', DEFAULTS.limits.maxBodyBytes),
    maxHeaderBytes,
    services: cap('services'),
    servers: cap('servers'),
    routers: cap('routers'),
    sessionRevocations: c.int(t, 'session_revocations', 'limits', DEFAULTS.limits.sessionRevocations, SESSION_REVOCATIONS.min, SESSION_REVOCATIONS.max),
  }
}

export function checkEntryPoints (c: Checker, raw: unknown, baseDir: string = process.cwd()): EntryPointConf[] {
  const eps = c.table(raw, 'entrypoints', null)
  const out: EntryPointConf[] = []
  const seen = new Set<string>()
  for (const [name, v] of Object.entries(eps)) {
    const p = join('entrypoints', name)
    const t: Table = c.table(v, p, ['address', 'protocol', 'engine', 'tls', 'service', 'websocket_max_message', 'health', 'merge_slashes', 'encoded_characters', 'http2'])
    const address = c.string(t, 'address', p)
    const hp = parseListenAddress(address)
    if (hp === null && address !== '') c.problem(join(p, 'address'), 'an address like "127.0.0.1:8080" or "[::1]:8080" (port 0: any free port)', address)
    // port 0 twice is two ports, each the kernel's choice
    if (hp !== null && hp.port !== 0) {
      const key = `${hp.host}:${hp.port}`
      if (seen.has(key)) c.problems.push(`${join(p, 'address')}: ${address} is already used by another entry point`)
      seen.add(key)
    }
    const protocol = c.oneOf(t, 'protocol', p, PROTOCOLS, 'http')
    const only = (key: string, proto: string): void => {
      if (t[key] !== undefined) c.problems.push(`${join(p, key)}: only for protocol = "${proto}" (this entry point is "${protocol}")`)
    }
    let tls: TlsConf | null = null
    let service = ''
    if (protocol === 'https') {
      if (t.tls === undefined) c.problems.push(`${join(p, 'tls')}: expected a table with cert and key (required for protocol = "https"), found nothing`)
      else tls = checkTls(c, t.tls, join(p, 'tls'), baseDir)
    } else only('tls', 'https')
    if (protocol !== 'https' && protocol !== 'h2c') only('http2', 'https" or "h2c')
    const http2 = checkHttp2(c, protocol === 'https' || protocol === 'h2c' ? t.http2 : undefined, p, protocol === 'h2c')
    let health = ''
    if (protocol === 'tcp') {
      service = c.string(t, 'service', p)
      only('websocket_max_message', 'http" or "https')
      only('health', 'http" or "https')
      only('engine', 'http" or "https')
      only('merge_slashes', 'http" or "https')
      only('encoded_characters', 'http" or "https')
    } else {
      only('service', 'tcp')
      const h = t.health ?? DEFAULTS.entrypoint.health
      if (typeof h !== 'string' || (h !== 'off' && !/^\/[^\s?#]*$/.test(h))) c.problem(join(p, 'health'), 'a path like "/health", or "off"', t.health)
      else health = h === 'off' ? '' : h
    }
    const wsMaxMessage = c.size(t, 'websocket_max_message', p, DEFAULTS.websocket.maxMessageBytes)
    if (wsMaxMessage < 1 || wsMaxMessage > 1024 ** 3) c.problem(join(p, 'websocket_max_message'), 'a size from 1 byte to "1G"', t.websocket_max_message)
    if (protocol === 'h2c') only('engine', 'http" or "https')
    const engine = c.oneOf(t, 'engine', p, ENGINES, DEFAULTS.entrypoint.engine)
    // node:https could offer h2 too, but its h2 streams would need node:http2's server here as well: one h2 engine
    if (engine === 'node' && http2.enabled) c.problems.push(`${join(join(p, 'http2'), 'enabled')}: HTTP/2 is served with engine = "uws" only (this entry point has engine = "node")`)
    out.push({ name, host: hp?.host ?? '', port: hp?.port ?? 0, protocol, tls, service, wsMaxMessage, health, engine, requestPath: checkRequestPath(c, t, p), http2 })
  }
  if (out.length === 0) c.problems.push('entrypoints: expected at least one entry point, found none')
  return out
}

/** A tcp entry point forwards to a `proxy` service defined in [services]. */
export function checkEntryPointServices (c: Checker, entrypoints: readonly EntryPointConf[], services: readonly ServiceConf[]): void {
  for (const ep of entrypoints) {
    if (ep.protocol !== 'tcp' || ep.service === '') continue
    const svc = services.find((s) => s.name === ep.service)
    const path = join(join('entrypoints', ep.name), 'service')
    if (svc === undefined) c.problems.push(`${path}: unknown service ${JSON.stringify(ep.service)}`)
    else if (svc.kind !== 'proxy') c.problems.push(`${path}: service ${JSON.stringify(ep.service)} is of kind "${svc.kind}"; a tcp entry point needs a "proxy" service`)
  }
}
