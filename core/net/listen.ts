// Binds a node:net (or node:tls) server; resolves false instead of throwing
// when the address cannot be bound, so callers report it with their own context.
import type net from 'node:net'

/** Linux sun_path holds 108 bytes with its terminating NUL. */
export const UNIX_PATH_MAX = 107

export function listenServer (server: net.Server, host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    server.once('error', () => resolve(false))
    server.listen({ host, port, backlog: 511 }, () => resolve(true))
  })
}

/** The port `server` listens on (the kernel's choice when it was asked for 0); 0 when it does not listen. */
export function boundPort (server: net.Server | null): number {
  const a = server?.address()
  return typeof a === 'object' && a !== null ? a.port : 0
}

/**
 * What worker 0's node:net listeners share (tcp, h2c, the TLS terminators): one server on an entry point's
 * address, its port, and a close that stops accepting while established connections carry on.
 */
export class NetListener {
  #server: net.Server | null = null

  /** Resolves false when the address cannot be bound. */
  protected async bind (server: net.Server, host: string, port: number): Promise<boolean> {
    const ok = await listenServer(server, host, port)
    if (ok) this.#server = server
    return ok
  }

  /** The port it listens on (the kernel's choice when the entry point asked for 0). */
  get port (): number {
    return boundPort(this.#server)
  }

  /** Stops accepting; established connections carry on. */
  close (): void {
    this.#server?.close()
    this.#server = null
  }
}
