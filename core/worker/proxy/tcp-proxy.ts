// TCP mode: an entry point with protocol = "tcp" relays raw TCP to its
// service's servers, balanced and health-checked like HTTP: the service's
// balancer over shared in-flight counts (a session counts as one in flight
// for its whole life, so leastconn sees open sessions), servers out of
// rotation by active checks (`health_check.type = "tcp"`: a connect) or
// passively after max_fails connect failures, a failed connect retried on
// another server (`retries`), `timeouts.connect`, and `timeouts.tunnel` as the
// idle time-out (no byte either way on a side closes the session). These
// connections are counted with the HTTP ones (connections.ts), and one over
// global.max_connections is closed at once.
//
// The listener lives in worker 0 only (core/worker/listeners.ts says why).
// Bytes are piped with stream backpressure both ways, and half-closes pass
// through (allowHalfOpen): a client that shuts down its sending side still
// gets the server's answer.
import net from 'node:net'
import { now } from '../../clock.js'
import type { EntryPointConf } from '../../config/static.js'
import type { Connections } from '../connections.js'
import type { DataPlane, ServiceRuntime } from '../dataplane.js'
import { ServerTries, connectServer } from './server-tries.js'
import { NetListener } from '../../net/listen.js'

const sessions = new Set<TcpSession>()

/** TCP sessions open in this thread. */
export function openSessions (): number {
  return sessions.size
}

export class TcpListener extends NetListener {
  readonly #ep: EntryPointConf
  readonly #dp: () => DataPlane
  readonly #conns: Connections

  /** `dp` returns the generation in force: a new session takes its service from it. */
  constructor (ep: EntryPointConf, dp: () => DataPlane, conns: Connections) {
    super()
    this.#ep = ep
    this.#dp = dp
    this.#conns = conns
  }

  /** Resolves false when the address cannot be bound. */
  async listen (): Promise<boolean> {
    // pauseOnConnect: the client's first bytes wait in the kernel until a server is connected
    const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true, noDelay: true }, (client) => {
      const conns = this.#conns
      client.once('close', () => conns.close())
      if (!conns.open()) {
        client.destroy()
        return
      }
      new TcpSession(this.#dp(), this.#ep, client).start()
    })
    return this.bind(server, this.#ep.host, this.#ep.port)
  }
}

class TcpSession extends ServerTries {
  readonly #dp: DataPlane
  readonly #ep: EntryPointConf
  readonly #client: net.Socket
  readonly #svc: ServiceRuntime | null
  #upstream: net.Socket | null = null
  #connected = false
  #finished = false
  /** for the access log: start tick, outcome (nginx stream $status) and the last server tried */
  readonly #start = now()
  #status = 503
  #serverName = ''

  constructor (dp: DataPlane, ep: EntryPointConf, client: net.Socket) {
    const svc = dp.services.get(ep.service) ?? null
    super(dp, svc)
    this.#svc = svc
    this.#dp = dp
    this.#ep = ep
    this.#client = client
  }

  start (): void {
    const client = this.#client
    sessions.add(this)
    client.on('error', () => this.#end())
    client.on('close', (hadError: boolean) => this.#closed(hadError, this.#upstream))
    if (this.#svc === null) {
      this.#end()
      return
    }
    this.#connect(false)
  }

  #connect (retry: boolean): void {
    const dp = this.#dp
    const server = this.claimServer(this.#client.remoteAddress ?? '', retry)
    if (server === null) {
      if (dp.log.debugEnabled) dp.log.debug('tcp: no server available', { entrypoint: this.#ep.name, service: this.#svc!.conf.name })
      this.#end()
      return
    }
    this.#serverName = server.conf.name
    const up = connectServer(server.conf, { allowHalfOpen: true })
    this.#upstream = up
    up.setTimeout(dp.conf.timeouts.connectMs)
    up.once('connect', () => this.#onConnected(up))
    up.on('timeout', () => {
      if (!this.#connected) this.#connectFailed(up)
      else this.#end() // idle: nothing moved on the server side for timeouts.tunnel
    })
    up.on('error', () => { if (!this.#connected) this.#connectFailed(up); else this.#end() })
    up.on('close', (hadError: boolean) => { if (this.#connected) this.#closed(hadError, this.#client) })
  }

  #onConnected (up: net.Socket): void {
    if (this.#finished || this.#upstream !== up) {
      up.destroy()
      return
    }
    this.#connected = true
    this.#status = 200
    const client = this.#client
    const idleMs = this.#dp.conf.timeouts.tunnelMs
    up.setTimeout(idleMs)
    client.setTimeout(idleMs, () => this.#end())
    // pipe: backpressure both ways; each side's end (FIN) is passed on as an end of the other
    client.pipe(up)
    up.pipe(client)
  }

  #connectFailed (up: net.Socket): void {
    if (this.#upstream !== up || this.#finished) return
    up.destroy()
    this.#upstream = null
    this.#status = 502 // unless another server connects
    this.tryFailed(true)
    this.#release()
    if (this.mayRetry()) {
      // nothing was sent yet (the client is paused until connected): another server can take it
      this.#connect(true)
      return
    }
    this.#end()
  }

  #release (): void {
    const connected = this.#connected
    this.releaseTry(connected ? this.#client.bytesRead : 0, connected ? this.#client.bytesWritten : 0)
  }

  /**
   * One side closed. A clean close after its end was passed on leaves the
   * other side to flush what it still holds (a half-closed exchange ends with
   * its last bytes, not a reset); anything else ends the session.
   */
  #closed (hadError: boolean, other: net.Socket | null): void {
    if (hadError || other === null || other.destroyed || !other.writableEnded) this.#end()
  }

  /** A side failed or idled out, or both are closed: close everything. Runs once. */
  #end (): void {
    if (this.#finished) return
    this.#finished = true
    sessions.delete(this)
    this.#release()
    this.#upstream?.destroy()
    this.#client.destroy()
    const log = this.#dp.accessLog
    if (log.enabled) {
      const c = this.#client
      log.writeTcp({
        client: c.remoteAddress ?? '',
        entrypoint: this.#ep.name,
        status: this.#status,
        bytes_in: c.bytesRead,
        bytes_out: c.bytesWritten,
        duration_ms: (now() - this.#start) | 0, // ticks wrap at 32 bits (core/clock.ts)
        service: this.#svc?.conf.name ?? this.#ep.service,
        server: this.#serverName,
      })
    }
  }
}
