// Sticky sessions by cookie, at run time: which server a request's cookie
// names, and the Set-Cookie that pins a client to the server it got. The value
// is an opaque digest of the service and the server (its name and address), the
// same in every worker, node and restart: affinity needs no shared table, and a
// server whose address changes gets new clients rather than a stranger's.
// The config side (names, attributes) is core/config/sticky.ts.
import { createHash } from 'node:crypto'
import type { ServerConf } from '../config/dynamic.js'
import type { StickyCookieConf } from '../config/sticky.js'

export class StickyCookies {
  readonly name: string
  /** server index by cookie value */
  readonly #index: Map<string, number>
  /** the whole Set-Cookie value per server index, rendered once */
  readonly #setCookie: readonly string[]

  constructor (conf: StickyCookieConf, service: string, servers: readonly ServerConf[]) {
    this.name = conf.name
    const values = servers.map((s) => createHash('sha256').update(`${service}\0${s.name}\0${s.address}`).digest('hex').slice(0, 16))
    this.#index = new Map(values.map((v, i) => [v, i]))
    const attrs = `; Path=${conf.path}` + (conf.domain !== '' ? `; Domain=${conf.domain}` : '') + (conf.maxAge > 0 ? `; Max-Age=${conf.maxAge}` : '') +
      (conf.secure ? '; Secure' : '') + (conf.httpOnly ? '; HttpOnly' : '') +
      (conf.sameSite !== '' ? `; SameSite=${conf.sameSite[0]!.toUpperCase()}${conf.sameSite.slice(1)}` : '')
    this.#setCookie = values.map((v) => `${conf.name}=${v}${attrs}`)
  }

  /**
   * The server index the request's cookie names, or -1 (no such cookie, or a value of no server
   * of this service). `headers`: flat [name, value, ...], names lower-case; every Cookie field is
   * read (HTTP/2 sends one per cookie, RFC 9113 §8.2.3).
   */
  wanted (headers: readonly string[]): number {
    const name = this.name
    for (let i = 0; i < headers.length; i += 2) {
      if (headers[i] !== 'cookie') continue
      const h = headers[i + 1]!
      let at = h.indexOf(name)
      while (at >= 0) {
        const end = at + name.length
        if (h.charCodeAt(end) === 0x3d /* = */ && (at === 0 || isSeparator(h, at - 1))) {
          const stop = h.indexOf(';', end + 1)
          return this.#index.get(h.slice(end + 1, stop < 0 ? h.length : stop).trim()) ?? -1
        }
        at = h.indexOf(name, at + 1)
      }
    }
    return -1
  }

  /** The Set-Cookie value that pins a client to server `idx`. */
  setCookie (idx: number): string {
    return this.#setCookie[idx]!
  }
}

/** The character before a cookie name: ';' or the spaces after it. */
function isSeparator (h: string, i: number): boolean {
  while (i >= 0 && (h.charCodeAt(i) === 0x20 || h.charCodeAt(i) === 0x09)) i--
  return i < 0 || h.charCodeAt(i) === 0x3b
}
