// Active health checks, run by the control plane: GET <path> on every server
// whose `check` flag is set, every `interval`, expecting `status` (200) within
// `timeout` (type = "tcp": a connect within `timeout`, for services behind
// tcp entry points; type = "grpc": grpc.health.v1.Health/Check answers SERVING,
// core/control/grpc-check.ts; the GET goes over HTTP/2 to the servers of an h2c
// or h2 service, core/control/h2-get-check.ts). HAProxy's rise/fall: `fall` consecutive failures take an UP server
// down, `rise` consecutive passes bring a DOWN one back. The verdict goes to
// shared memory, so every worker sees it at its next pick.
// Logged: every UP/DOWN change, and every change of a check's outcome (a DOWN
// server whose check goes from "connection refused" to "→ 404" says so), each
// with the reason in words (core/shm/server-why.ts), never one line per check.
import http from 'node:http'
import net from 'node:net'
import type { Config } from '../config/load.js'
import type { HealthCheckConf, ServerConf } from '../config/dynamic.js'
import type { UpstreamTlsConf } from '../config/upstream-tls.js'
import type { Logger } from '../log.js'
import {
  type Shm, CHECK_DOWN, CHECK_STATUS, CHECK_UP, S_CHECK, S_CHECK_CODE, S_CHECK_ERRNO, S_CHECK_FAILS, S_CHECK_MS,
  S_CHECK_STATUS, S_DOWN_COUNT, S_LAST_CHANGE, S_STREAK, serverBase,
} from '../shm/layout.js'
import { checkVerdict, errnoOf } from '../shm/server-why.js'
import { bumpServiceState } from '../shm/server-state.js'
import type { SlotRegistry } from './slots.js'
import { reportFault } from './faults.js'
import { grpcCheck } from './grpc-check.js'
import { h2GetCheck } from './h2-get-check.js'

interface Probe {
  readonly key: string
  readonly service: string
  readonly server: ServerConf
  readonly check: HealthCheckConf
  /** the service's servers speak HTTP/2 only (protocol "h2c" or "h2"): an http check goes over HTTP/2 */
  readonly h2: boolean
  /** the service's TLS to its servers (protocol = "h2"); null = cleartext */
  readonly tls: UpstreamTlsConf | null
  readonly slot: number
  readonly serviceSlot: number
  timer: NodeJS.Timeout | null
  req: http.ClientRequest | null
  /** the connect of a `type = "tcp"` check in progress */
  sock: net.Socket | null
  /** ends the HTTP/2 call of a check in progress (type "grpc", or "http" on an h2c or h2 service) */
  abort: AbortController | null
}

const statusIndex = (s: typeof CHECK_STATUS[number]): number => CHECK_STATUS.indexOf(s)

export class HealthChecker {
  readonly #shm: Shm
  readonly #log: Logger
  readonly #probes = new Map<string, Probe>()

  constructor (shm: Shm, log: Logger) {
    this.#shm = shm
    this.#log = log
  }

  /** (Re)schedules probes for `config`: unchanged servers keep their timers and streaks. */
  update (config: Config, slots: SlotRegistry): void {
    const want = new Set<string>()
    for (const svc of config.services) {
      if (svc.kind !== 'proxy') continue
      for (const srv of svc.servers) {
        if (!srv.check) continue
        const key = JSON.stringify([svc.name, srv, svc.healthCheck, svc.protocol, svc.tls])
        want.add(key)
        if (this.#probes.has(key)) continue
        const probe: Probe = { key, service: svc.name, server: srv, check: svc.healthCheck, h2: svc.protocol !== 'http', tls: svc.tls, slot: slots.server(svc.name, srv.name)!, serviceSlot: slots.service(svc.name)!, timer: null, req: null, sock: null, abort: null }
        this.#probes.set(key, probe)
        this.#schedule(probe, 0)
      }
    }
    for (const [key, p] of this.#probes) {
      if (want.has(key)) continue
      this.#stop(p)
      this.#probes.delete(key)
    }
    // a server no longer checked must not stay DOWN because of old checks
    for (const svc of config.services) {
      for (const srv of svc.servers) {
        const slot = slots.server(svc.name, srv.name)
        if (!srv.check && slot !== undefined && Atomics.load(this.#shm.i32, serverBase(slot) + S_CHECK) !== CHECK_UP) {
          Atomics.store(this.#shm.i32, serverBase(slot) + S_CHECK, CHECK_UP)
          bumpServiceState(this.#shm.i32, slots.service(svc.name)!)
        }
      }
    }
  }

  close (): void {
    for (const p of this.#probes.values()) this.#stop(p)
    this.#probes.clear()
  }

  #stop (p: Probe): void {
    if (p.timer !== null) clearTimeout(p.timer)
    p.req?.destroy()
    p.sock?.destroy()
    p.abort?.abort()
    p.timer = null
    p.req = null
    p.sock = null
    p.abort = null
  }

  #schedule (p: Probe, delayMs: number): void {
    p.timer = setTimeout(() => {
      try {
        this.#run(p)
      } catch (err) {
        // a bug in one probe must not end the process nor stop checking this server
        reportFault('health check', err, { server: p.key })
        if (p.timer === null && this.#probes.get(p.key) === p) this.#schedule(p, p.check.intervalMs)
      }
    }, delayMs)
    p.timer.unref()
  }

  #run (p: Probe): void {
    p.timer = null
    const started = Date.now()
    let done = false
    const finish = (code: number, status: typeof CHECK_STATUS[number], err: unknown = null): void => {
      if (done) return
      done = true
      p.req = null
      p.sock = null
      p.abort = null
      this.#record(p, code, status, errnoOf(err), Date.now() - started)
      if (this.#probes.get(p.key) === p) this.#schedule(p, p.check.intervalMs)
    }
    const s = p.server
    if (p.check.type === 'tcp') {
      // a connect within the time-out passes; nothing is sent (HAProxy's plain `check`)
      const sock = s.path === '' ? net.connect({ host: s.host, port: s.port }) : net.connect({ path: s.path })
      p.sock = sock
      sock.setTimeout(p.check.timeoutMs, () => { sock.destroy(); finish(0, 'L4TOUT') })
      sock.once('connect', () => { sock.destroy(); finish(0, 'L4OK') })
      sock.once('error', (err) => finish(0, 'L4CON', err))
      return
    }
    if (p.check.type === 'grpc' || p.h2) {
      const abort = new AbortController()
      p.abort = abort
      void (p.check.type === 'grpc' ? grpcCheck : h2GetCheck)(s, p.check, p.tls, abort.signal).then((r) => finish(r.code, r.status, r.err))
      return
    }
    const req = http.request({
      host: s.path === '' ? s.host : undefined,
      port: s.path === '' ? s.port : undefined,
      socketPath: s.path === '' ? undefined : s.path,
      path: p.check.path,
      method: 'GET',
      agent: false,
      timeout: p.check.timeoutMs,
      headers: { host: s.path === '' ? s.address : 'localhost', 'user-agent': 'lb-health-check', connection: 'close' },
    }, (res) => {
      res.resume()
      res.on('end', () => finish(res.statusCode ?? 0, res.statusCode === p.check.status ? 'L7OK' : 'L7STS'))
      res.on('error', (err) => finish(0, 'L7RSP', err))
    })
    p.req = req
    req.on('timeout', () => {
      req.destroy()
      finish(0, req.socket?.connecting === false ? 'L7TOUT' : 'L4TOUT')
    })
    // a request that fails once connected (reset, garbage) is an invalid answer, not a failed connect
    let connected = false
    req.once('socket', (sock) => sock.once('connect', () => { connected = true }))
    req.on('error', (err) => finish(0, connected ? 'L7RSP' : 'L4CON', err))
    req.end()
  }

  #record (p: Probe, code: number, status: typeof CHECK_STATUS[number], errno: number, ms: number): void {
    const i32 = this.#shm.i32
    const b = serverBase(p.slot)
    const pass = status === 'L7OK' || status === 'L4OK'
    const changed = Atomics.load(i32, b + S_CHECK_STATUS) !== statusIndex(status) || Atomics.load(i32, b + S_CHECK_CODE) !== code ||
      Atomics.load(i32, b + S_CHECK_ERRNO) !== errno
    Atomics.store(i32, b + S_CHECK_ERRNO, errno)
    Atomics.store(i32, b + S_CHECK_CODE, code)
    Atomics.store(i32, b + S_CHECK_MS, ms)
    Atomics.store(i32, b + S_CHECK_STATUS, statusIndex(status))
    const up = Atomics.load(i32, b + S_CHECK) === CHECK_UP
    let streak = Atomics.load(i32, b + S_STREAK)
    streak = pass ? Math.max(streak, 0) + 1 : Math.min(streak, 0) - 1
    Atomics.store(i32, b + S_STREAK, streak)
    if (!pass && up) Atomics.add(i32, b + S_CHECK_FAILS, 1)
    if (up && !pass && -streak >= p.check.fall) {
      Atomics.store(i32, b + S_CHECK, CHECK_DOWN)
      Atomics.add(i32, b + S_DOWN_COUNT, 1)
      Atomics.store(i32, b + S_LAST_CHANGE, Date.now() | 0)
      bumpServiceState(i32, p.serviceSlot)
      this.#log.warn('server DOWN', this.#fields(p, status, code))
    } else if (!up && pass && streak >= p.check.rise) {
      Atomics.store(i32, b + S_CHECK, CHECK_UP)
      Atomics.store(i32, b + S_LAST_CHANGE, Date.now() | 0)
      bumpServiceState(i32, p.serviceSlot)
      this.#log.info('server UP', this.#fields(p, status, code))
    } else if (changed) {
      // no state change, but the check sees something new: say what, and where the server stands
      const fields = this.#fields(p, status, code)
      if (up) this.#log[pass ? 'info' : 'warn'](pass ? 'health check passed, server UP' : 'health check failed, server still UP', fields)
      else this.#log.warn(pass ? 'health check passed, server still DOWN' : 'health check failed, server still DOWN', fields)
    }
  }

  /** Log fields: who, and the reason in words ("web1 127.0.0.1:9001: GET /health → 404, 3 of 3 checks failed"). */
  #fields (p: Probe, status: typeof CHECK_STATUS[number], code: number): Record<string, unknown> {
    const s = p.server
    return { service: p.service, server: s.name, address: s.address, check: status, code, reason: `${s.name} ${s.address}: ${checkVerdict(this.#shm.i32, p.slot, p.check)}` }
  }
}
