// The config API's models (HAProxy Data Plane API v2 "backend" and "server")
// and their mapping to our TOML service tables. Validation follows the
// swagger layer's behaviour: unknown fields, wrong types, missing required
// fields and bad enum values are schema violations answered with HTTP 422 and
// go-openapi's error codes (601 type, 602 required, 605 pattern, 606 enum,
// 608/609 max/min, 616 forbidden property) and messages.
import type { Table } from '../../config/check.js'
import { BALANCES, type ServerConf, type ServiceConf } from '../../config/dynamic.js'
import { DEFAULTS } from '../../config/defaults.js'
import { parseHostPort } from '../../config/static.js'

/** The swagger enum; values outside BALANCES (our balance option) are valid HAProxy algorithms this balancer does not implement. */
const DPAPI_ALGORITHMS = ['roundrobin', 'static-rr', 'leastconn', 'first', 'source', 'uri', 'url_param', 'hdr', 'random', 'rdp-cookie', 'hash']
const NAME = /^[A-Za-z0-9-_.:]+$/
/** longest backend or server name, in characters (HAProxy's are bounded too) */
const MAX_NAME = 255

/**
 * Names key plain objects (the TOML services, the state file's backends), so
 * a member of Object.prototype ("__proto__", "constructor") would find or set
 * that member instead of a backend of its own.
 */
function checkName (s: Schema, name: string): void {
  if (!NAME.test(name)) s.add(605, 'name in body should match \'^[A-Za-z0-9-_.:]+$\'')
  else if (name.length > MAX_NAME) s.add(605, `name in body should be at most ${MAX_NAME} characters long`)
  else if (name in Object.prototype) s.add(605, `name "${name}" is reserved (a member of every JavaScript object); choose another`)
}

export interface SchemaError { readonly code: number, readonly message: string }

/** Collects schema violations for one body, in order. */
class Schema {
  readonly errors: SchemaError[] = []
  add (code: number, message: string): void { this.errors.push({ code, message }) }

  object (v: unknown, path: string): Table | null {
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return v as Table
    this.add(601, `${path === '' ? 'body' : `${path} in body`} must be of type object: ${JSON.stringify(typeOf(v))}`)
    return null
  }

  allowed (t: Table, path: string, keys: readonly string[]): void {
    for (const k of Object.keys(t)) if (!keys.includes(k)) this.add(616, `${path === '' ? k : `${path}.${k}`} in body is a forbidden property`)
  }

  string (t: Table, key: string, path: string, required: boolean): string | undefined {
    const v = t[key]
    const name = path === '' ? key : `${path}.${key}`
    if (v === undefined || v === null) {
      if (required) this.add(602, `${name} in body is required`)
      return undefined
    }
    if (typeof v !== 'string') {
      this.add(601, `${name} in body must be of type string: ${JSON.stringify(typeOf(v))}`)
      return undefined
    }
    return v
  }

  enum (t: Table, key: string, path: string, values: readonly string[], required: boolean): string | undefined {
    const v = this.string(t, key, path, required)
    if (v !== undefined && !values.includes(v)) {
      this.add(606, `${path === '' ? key : `${path}.${key}`} in body should be one of [${values.join(' ')}]`)
      return undefined
    }
    return v
  }

  int (t: Table, key: string, path: string, min: number, max: number, required = false): number | undefined {
    const v = t[key]
    const name = path === '' ? key : `${path}.${key}`
    if (v === undefined || v === null) {
      if (required) this.add(602, `${name} in body is required`)
      return undefined
    }
    if (typeof v !== 'number' || !Number.isInteger(v)) {
      this.add(601, `${name} in body must be of type integer: ${JSON.stringify(typeOf(v))}`)
      return undefined
    }
    if (v < min) { this.add(609, `${name} in body should be greater than or equal to ${min}`); return undefined }
    if (v > max) { this.add(608, `${name} in body should be less than or equal to ${max}`); return undefined }
    return v
  }
}

function typeOf (v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'array'
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number'
  return typeof v
}

const BACKEND_KEYS = ['name', 'mode', 'balance', 'retries', 'adv_check', 'httpchk_params', 'check_timeout', 'default_server']

export interface BackendModel {
  name: string
  mode: 'http'
  balance: { algorithm: string }
  retries: number
  adv_check: 'httpchk'
  httpchk_params: { method: 'GET', uri: string }
  check_timeout: number
  default_server: { inter: number, rise: number, fall: number }
}

export interface ServerModel {
  name: string
  address: string
  port?: number
  weight: number
  check: 'enabled' | 'disabled'
  maintenance: 'enabled' | 'disabled'
}

/** The API view of a proxy service. */
export function backendOf (s: ServiceConf): BackendModel {
  return {
    name: s.name,
    mode: 'http',
    balance: { algorithm: s.balance },
    retries: s.retries,
    adv_check: 'httpchk',
    httpchk_params: { method: 'GET', uri: s.healthCheck.path },
    check_timeout: s.healthCheck.timeoutMs,
    default_server: { inter: s.healthCheck.intervalMs, rise: s.healthCheck.rise, fall: s.healthCheck.fall },
  }
}

export function serverOf (s: ServerConf): ServerModel {
  const base = s.path !== ''
    ? { name: s.name, address: `unix:${s.path}` }
    : { name: s.name, address: s.host, port: s.port }
  return { ...base, weight: s.weight, check: s.check ? 'enabled' : 'disabled', maintenance: s.maintenance ? 'enabled' : 'disabled' }
}

/**
 * Validates a backend body and returns the service table it makes, merged over
 * `previous` (the table it replaces, so TOML keys the model does not cover,
 * such as keepalive and the servers, are kept).
 */
export function backendTable (body: unknown, previous: Table | null): { name: string, table: Table } | SchemaError[] {
  const s = new Schema()
  const t = s.object(body, '')
  if (t === null) return s.errors
  s.allowed(t, '', BACKEND_KEYS)
  const name = s.string(t, 'name', '', true)
  if (name !== undefined) checkName(s, name)
  s.enum(t, 'mode', '', ['http', 'tcp'], false)
  if (t.mode === 'tcp') s.add(606, 'mode in body should be one of [http] (tcp backends are not supported)')
  let algorithm: string | undefined
  if (t.balance !== undefined) {
    const b = s.object(t.balance, 'balance')
    if (b !== null) {
      s.allowed(b, 'balance', ['algorithm'])
      algorithm = s.enum(b, 'algorithm', 'balance', DPAPI_ALGORITHMS, true)
      if (algorithm !== undefined && !(BALANCES as readonly string[]).includes(algorithm)) {
        s.add(606, `balance.algorithm in body should be one of [${BALANCES.join(' ')}] (${algorithm} is not supported)`)
        algorithm = undefined
      }
    }
  }
  const retries = s.int(t, 'retries', '', 0, 10)
  s.enum(t, 'adv_check', '', ['httpchk'], false)
  let uri: string | undefined
  if (t.httpchk_params !== undefined) {
    const h = s.object(t.httpchk_params, 'httpchk_params')
    if (h !== null) {
      s.allowed(h, 'httpchk_params', ['method', 'uri', 'version'])
      s.enum(h, 'method', 'httpchk_params', ['GET'], false)
      s.string(h, 'version', 'httpchk_params', false)
      uri = s.string(h, 'uri', 'httpchk_params', false)
      if (uri !== undefined && !uri.startsWith('/')) { s.add(605, "httpchk_params.uri in body should match '^/'"); uri = undefined }
    }
  }
  const checkTimeout = s.int(t, 'check_timeout', '', 1, 3_600_000)
  let inter: number | undefined, rise: number | undefined, fall: number | undefined
  if (t.default_server !== undefined) {
    const d = s.object(t.default_server, 'default_server')
    if (d !== null) {
      s.allowed(d, 'default_server', ['inter', 'rise', 'fall'])
      inter = s.int(d, 'inter', 'default_server', 10, 3_600_000)
      rise = s.int(d, 'rise', 'default_server', 1, 100)
      fall = s.int(d, 'fall', 'default_server', 1, 100)
    }
  }
  if (s.errors.length > 0) return s.errors
  const prev = previous ?? {}
  const prevHc = (typeof prev.health_check === 'object' && prev.health_check !== null ? prev.health_check : {}) as Table
  const dh = DEFAULTS.healthCheck
  // PUT replaces the model's fields: an omitted field takes its default, as a DPAPI PUT does
  const table: Table = {
    ...prev,
    kind: 'proxy',
    balance: algorithm ?? DEFAULTS.service.balance,
    retries: retries ?? DEFAULTS.service.retries,
    health_check: {
      ...prevHc,
      path: uri ?? dh.path,
      timeout: `${checkTimeout ?? dh.timeoutMs}ms`,
      interval: `${inter ?? dh.intervalMs}ms`,
      rise: rise ?? dh.rise,
      fall: fall ?? dh.fall,
    },
  }
  if (!Array.isArray(table.servers)) table.servers = []
  return { name: name!, table }
}

const SERVER_KEYS = ['name', 'address', 'port', 'weight', 'check', 'maintenance']

/** Validates a server body; returns the [[services.X.servers]] table, merged over `previous`. */
export function serverTable (body: unknown, previous: Table | null): { name: string, table: Table } | SchemaError[] {
  const s = new Schema()
  const t = s.object(body, '')
  if (t === null) return s.errors
  s.allowed(t, '', SERVER_KEYS)
  const name = s.string(t, 'name', '', true)
  if (name !== undefined) checkName(s, name)
  const address = s.string(t, 'address', '', true)
  const port = s.int(t, 'port', '', 1, 65535)
  const weight = s.int(t, 'weight', '', 0, 256)
  const check = s.enum(t, 'check', '', ['enabled', 'disabled'], false)
  const maintenance = s.enum(t, 'maintenance', '', ['enabled', 'disabled'], false)
  let full = ''
  if (address !== undefined) {
    if (address.startsWith('unix:') || address.startsWith('/')) {
      const path = address.startsWith('unix:') ? address.slice(5) : address
      if (!path.startsWith('/')) s.add(605, 'address in body should be an IP address, a host name or an absolute unix socket path')
      if (port !== undefined) s.add(616, 'port in body is a forbidden property for a unix socket address')
      full = `unix:${path}`
    } else if (t.port === undefined || t.port === null) {
      s.add(602, 'port in body is required')
    } else if (port === undefined) {
      // the port was given but is invalid: s.int has said why; nothing more is wrong with the address
    } else {
      const host = address.includes(':') ? `[${address.replace(/^\[|\]$/g, '')}]` : address
      full = `${host}:${port}`
      if (parseHostPort(full) === null) s.add(605, 'address in body should be an IP address or a host name')
    }
  }
  if (s.errors.length > 0) return s.errors
  const table: Table = {
    ...(previous ?? {}),
    name: name!,
    address: full,
    weight: weight ?? DEFAULTS.server.weight,
    // HAProxy semantics: a server without `check` is not health-checked
    check: check === 'enabled',
    maintenance: maintenance === 'enabled',
  }
  return { name: name!, table }
}
