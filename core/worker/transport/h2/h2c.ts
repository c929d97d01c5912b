// An h2c entry point (protocol = "h2c"): HTTP/2 with prior knowledge on plain
// TCP, for internal gRPC clients and services (Traefik serves h2c on its plain
// entry points; nginx `listen ... http2` without ssl). A node:net server in
// worker 0 (Node 20's worker threads cannot share a port with node:net:
// listeners.ts) hands each counted connection to the entry point's HTTP/2
// server (h2.ts). A client that speaks HTTP/1.1 here gets a GOAWAY
// PROTOCOL_ERROR from node:http2: nothing is routed.
import net from 'node:net'
import type { EntryPointConf } from '../../../config/static.js'
import type { Logger } from '../../../log.js'
import { NetListener } from '../../../net/listen.js'
import type { Connections } from '../../connections.js'
import { h2Server } from './h2.js'
import type { RequestHandler } from '../listen-options.js'

export class H2cListener extends NetListener {
  readonly #ep: EntryPointConf
  readonly #handler: RequestHandler
  readonly #conns: Connections
  readonly #streamTimeoutMs: () => number
  readonly #log: Logger

  constructor (ep: EntryPointConf, handler: RequestHandler, conns: Connections, streamTimeoutMs: () => number, log: Logger) {
    super()
    this.#log = log
    this.#ep = ep
    this.#handler = handler
    this.#conns = conns
    this.#streamTimeoutMs = streamTimeoutMs
  }

  /** Resolves false when the address cannot be bound. */
  async listen (): Promise<boolean> {
    const h2 = h2Server({ conf: this.#ep.http2, entrypoint: this.#ep.name, proto: 'http', handler: this.#handler, streamTimeoutMs: this.#streamTimeoutMs, log: this.#log })
    const server = net.createServer({ noDelay: true }, (sock) => {
      const conns = this.#conns
      sock.once('close', () => conns.close())
      if (!conns.open()) {
        sock.destroy()
        return
      }
      h2.emit('connection', sock)
    })
    server.on('error', () => { /* listen errors are reported through listen() */ })
    return this.bind(server, this.#ep.host, this.#ep.port)
  }
}
