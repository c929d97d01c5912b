// tls-alpn-01 answers (RFC 8737) on an https entry point that a resolver's
// tls_challenge names, which is therefore terminated in node:tls
// (tls-terminator.ts): uWS negotiates no ALPN.
//
// While a challenge is pending for the entry point, each new connection's
// ClientHello is read first (client-hello.ts): one that offers ALPN
// "acme-tls/1" for a name with a pending challenge gets that challenge's
// self-signed certificate and the protocol acme-tls/1, and is closed once the
// handshake is done (the validation server sends nothing more). Every other
// connection, its bytes put back unread, goes to the entry point's TLS server
// as usual. With no challenge pending (nearly always) connections go there at
// once, unread.
import type net from 'node:net'
import tls from 'node:tls'
import { parseClientHello } from '../../net/client-hello.js'
import type { AcmeAlpnChallenge } from '../../protocol.js'

export const ACME_TLS_1 = 'acme-tls/1'

/** More than any ClientHello record (client-hello.ts): a peer sending this much without one is handed on as is. */
const PEEK_MAX = 20_000

export class AlpnChallenges {
  readonly #entrypoint: string
  /** host → the context presenting its challenge certificate */
  #contexts = new Map<string, tls.SecureContext>()

  constructor (entrypoint: string) {
    this.#entrypoint = entrypoint
  }

  /** The pending challenges from now on (all entry points' : those of this one are kept). Throws on an unusable certificate. */
  set (challenges: Readonly<Record<string, AcmeAlpnChallenge>>): void {
    const next = new Map<string, tls.SecureContext>()
    for (const [host, c] of Object.entries(challenges)) {
      if (c.entrypoint === this.#entrypoint) next.set(host, tls.createSecureContext({ cert: c.cert, key: c.key }))
    }
    this.#contexts = next
  }

  /**
   * Answers `sock` if it is a tls-alpn-01 validation, else hands it to `serve`
   * with every byte it sent still unread. A connection that sends no
   * ClientHello within `timeoutMs` is closed.
   */
  accept (sock: net.Socket, serve: (sock: net.Socket) => void, timeoutMs: number): void {
    if (this.#contexts.size === 0) return serve(sock)
    let buf = Buffer.alloc(0)
    const fail = (): void => { sock.destroy() }
    const timer = setTimeout(fail, timeoutMs)
    const onData = (d: Buffer): void => {
      buf = Buffer.concat([buf, d])
      const hello = parseClientHello(buf)
      if (hello === null && buf.length < PEEK_MAX) return
      clearTimeout(timer)
      sock.off('data', onData)
      sock.off('error', fail)
      sock.pause()
      sock.unshift(buf)
      const ctx = typeof hello === 'object' && hello !== null && hello.alpn.includes(ACME_TLS_1) ? this.#contexts.get(hello.servername) : undefined
      if (ctx === undefined) serve(sock)
      else answer(sock, ctx, timeoutMs)
    }
    sock.on('data', onData)
    sock.on('error', fail)
    sock.once('close', () => clearTimeout(timer))
  }
}

/** The challenge handshake; the connection ends once it is done. */
function answer (sock: net.Socket, secureContext: tls.SecureContext, timeoutMs: number): void {
  const s = new tls.TLSSocket(sock, { isServer: true, secureContext, ALPNCallback: ({ protocols }) => (protocols.includes(ACME_TLS_1) ? ACME_TLS_1 : undefined) })
  const timer = setTimeout(() => s.destroy(), timeoutMs)
  s.once('secure', () => s.end())
  s.on('error', () => s.destroy())
  s.once('close', () => clearTimeout(timer))
}
