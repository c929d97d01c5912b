// peek(2) and dup(2) on a connection's descriptor, from lb's native addon
// (native/fd-peek.c, built by the install step). null where it was not built
// (no C compiler, not Linux) or LB_FD_PEEK=off asks lb to do without it: the
// terminator then serves every connection in node:tls, as before it existed.
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export interface FdCalls {
  /** The bytes waiting on `fd`, copied into `buf` and left unread: their count, 0 once the peer closed, -errno (-EAGAIN: none yet). */
  peek (fd: number, buf: Buffer): number
  /** A new descriptor (close-on-exec) for the connection of `fd`, or -errno. */
  dup (fd: number): number
}

export const EAGAIN = 11

function load (): FdCalls | null {
  if (process.env.LB_FD_PEEK === 'off' || process.platform !== 'linux') return null
  // this file runs as dist/core/net/fd-peek.js
  const file = join(fileURLToPath(new URL('.', import.meta.url)), '..', '..', '..', 'native', 'build', 'fd-peek.node')
  try {
    return createRequire(import.meta.url)(file) as FdCalls
  } catch {
    return null
  }
}

export const fdCalls: FdCalls | null = load()

/** The descriptor of a node:net socket (libuv's handle keeps it; -1 when it has none). */
export function socketFd (sock: object): number {
  const fd = (sock as { _handle?: { fd?: unknown } })._handle?.fd
  return typeof fd === 'number' ? fd : -1
}
