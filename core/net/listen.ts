// Binds a node:net (or node:tls) server; resolves false instead of throwing
// when the address cannot be bound, so callers report it with their own context.
import type net from 'node:net'

export function listenServer (server: net.Server, host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    server.once('error', () => resolve(false))
    server.listen({ host, port, backlog: 511 }, () => resolve(true))
  })
}
