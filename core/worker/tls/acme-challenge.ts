// http-01 answers (RFC 8555 §8.3) of the ACME orders in progress, handed to
// this worker by the control plane (protocol.ts AcmeState). The data plane
// asks here before routing, so redirects and middlewares never see them.
import type { AcmeChallenge } from '../../protocol.js'

const PREFIX = '/.well-known/acme-challenge/'

let tokens = new Map<string, AcmeChallenge>()

export function setAcmeTokens (t: Readonly<Record<string, AcmeChallenge>>): void {
  tokens = new Map(Object.entries(t))
}

/** The key authorization to answer for a GET of `path` on `entrypoint`, or null (not a pending challenge there). */
export function acmeAnswer (entrypoint: string, path: string): string | null {
  // no order in progress (nearly always): one size check per request
  if (tokens.size === 0 || !path.startsWith(PREFIX)) return null
  const c = tokens.get(path.slice(PREFIX.length))
  return c !== undefined && c.entrypoint === entrypoint ? c.keyAuthorization : null
}
