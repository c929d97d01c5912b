// Who a generation request is charged to: the consumer of the API key it
// carries, else the user lb's data plane authenticated, else its source
// address. Keys are checked by their SHA-256 in constant time
// (core/auth/token-digest.ts, as [admin] tokens are); the key itself is never
// kept, logged or counted, only the consumer's name.
//
// The data plane reaches this service over its unix socket as an ordinary
// upstream and sets x-real-ip and x-lb-user itself, dropping any a client
// sent (core/worker/proxy/forward-head.ts): on that socket they are trusted.
// On the optional TCP listener (`listen`) they are not: the peer address is
// the consumer there.

import type { IncomingMessage } from 'node:http'
import { findDigest, parseTokenHash, tokenDigest } from '../../auth/token-digest.js'
import type { GenAuthConf, GenKeyConf, GenLimits } from '../../config/generation.js'
import { ERRORS, formatError } from '../../errors.js'
import type { ApiError } from '../dispatch/request.js'
import { OTHER } from './conf.js'
import { compileModels } from './models.js'

/** The header the data plane sets to the user its basicAuth, jwt or oidc middleware authenticated. */
export const USER_HEADER = 'x-lb-user'

export interface Consumer {
  /** The ledger's key: a key's consumer name, "user:<name>" or "addr:<address>" (never a key). */
  readonly id: string
  /** The metric label: a key's consumer name, or "other" (bounded label cardinality). */
  readonly label: string
  readonly limits: GenLimits
  /** Whether the consumer may use (and list) a model, by canonical "name:tag"; null = every model. */
  readonly allows: ((model: string) => boolean) | null
}

export const mayUse = (who: Consumer, model: string): boolean => who.allows === null || who.allows(model)

const BEARER = /^Bearer\s+(\S+)\s*$/i

/** The refusal of a request without a valid key, with OpenAI's code for it (its clients raise AuthenticationError). */
const unauthorized = (reason: string): ApiError =>
  ({ status: ERRORS.LB_ERR_GEN_API_KEY.status, message: formatError('LB_ERR_GEN_API_KEY', { reason }), code: 'invalid_api_key' })

export class Consumers {
  readonly #digests: Buffer[] = []
  /** by digest index */
  readonly #byDigest: Consumer[] = []
  readonly #required: boolean
  /** Consumers without a key are made per request (cheap, fixed shape); their limits are shared. */
  readonly #anonLimits: GenLimits

  constructor (auth: GenAuthConf, keys: readonly GenKeyConf[]) {
    for (const k of keys) {
      const c: Consumer = { id: k.consumer, label: k.consumer, limits: k, allows: compileModels(k.models) }
      for (const h of k.hashes) {
        const d = parseTokenHash(h)
        if (d === null) continue // refused by checkKeys already
        this.#digests.push(d)
        this.#byDigest.push(c)
      }
    }
    this.#required = auth.required && keys.length > 0
    this.#anonLimits = { rpm: auth.rpm, tpm: auth.tpm, tpd: auth.tpd, maxInFlight: auth.maxInFlight }
  }

  /** Whether keys are configured at all (without any, an Authorization header is not looked at). */
  get keyed (): boolean { return this.#digests.length > 0 }

  /** The consumers that have keys, once each (a consumer with several keys is one). */
  keyedConsumers (): Consumer[] {
    return [...new Map(this.#byDigest.map((c) => [c.label, c])).values()]
  }

  /** The names of the consumers that have keys (the bounded set of metric labels, with "other"). */
  labels (): string[] {
    return [...new Set(this.#byDigest.map((c) => c.label))]
  }

  /** The request's consumer, or a 401 (`trusted`: it came over the data plane's unix socket). */
  identify (req: IncomingMessage, trusted: boolean): Consumer | ApiError {
    const address = trusted ? header(req, 'x-real-ip') : req.socket.remoteAddress ?? ''
    return this.identifyBy(header(req, 'authorization'), trusted ? header(req, USER_HEADER) : '', address)
  }

  /**
   * The consumer of a request with this Authorization header, authenticated user ('' none) and client address,
   * or a 401: identify's rule, also for a data-plane worker's relay (core/gen/edge/), which has them from its Ctx.
   */
  identifyBy (authorization: string, user: string, address: string): Consumer | ApiError {
    if (this.keyed) {
      const m = BEARER.exec(authorization)
      if (m !== null) {
        const i = findDigest(this.#digests, tokenDigest(m[1]!))
        if (i >= 0) return this.#byDigest[i]!
        // a bearer token the data plane's jwt middleware verified is the user's, not a key
        if (user === '' || this.#required) return unauthorized('incorrect API key provided')
      }
      if (this.#required) return unauthorized('no API key provided')
    }
    if (user !== '') return this.#anon(`user:${user}`)
    return this.#anon(`addr:${address === '' ? 'local' : address}`)
  }

  /**
   * The consumer whose id is `id` (what identifyBy gave a worker, which sends only the id, never a key): a keyed
   * consumer by name, else one without a key ("user:..." or "addr:..."); null for an id no keyed consumer has
   * that is not one of those.
   */
  byId (id: string): Consumer | null {
    for (const c of this.#byDigest) if (c.id === id) return c
    return id.startsWith('user:') || id.startsWith('addr:') ? this.#anon(id) : null
  }

  #anon (id: string): Consumer {
    return { id, label: OTHER, limits: this.#anonLimits, allows: null }
  }
}

function header (req: IncomingMessage, name: string): string {
  const v = req.headers[name]
  return typeof v === 'string' ? v : ''
}
