// "host:port" addresses as the config writes them (entry points, servers,
// admin listeners). Its own module so that static.ts and dynamic.ts both use it
// without importing each other.

export interface HostPort { host: string, port: number }

/** "127.0.0.1:8080", "[::1]:8080", "localhost:80" → {host, port}; null when malformed. */
export function parseHostPort (s: string): HostPort | null {
  const hp = parseListenAddress(s)
  return hp === null || hp.port === 0 ? null : hp
}

/**
 * An address lb listens on: as parseHostPort, and port 0 too, which asks the
 * kernel for a free port (reported in the "listening" log line once bound), so
 * that nothing picks a port, closes it and hopes it is still free when lb binds it.
 */
export function parseListenAddress (s: string): HostPort | null {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(s)
  if (m === null) return null
  const port = Number(m[3])
  if (port > 65535) return null
  return { host: m[1] ?? m[2]!, port }
}

/** The inverse of parseHostPort: an IPv6 host is bracketed so its colons are not read as the port's. */
export function formatHostPort (host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`
}
