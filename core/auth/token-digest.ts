// Bearer tokens as lb keeps them: their SHA-256, never the token itself, and
// compared in constant time. Used by [admin] tokens (configured in clear,
// digested at load) and by the generation service's keys (configured as
// "sha256:<64 hex>", so the config file holds no secret). A token is a long
// random string, not a password: one SHA-256 is the right cost (no salt or
// stretching to slow a guesser that must guess 128 bits anyway).
import { createHash, timingSafeEqual } from 'node:crypto'

/** How a configured hash is written: the prefix, then the digest in lower-case hex. */
export const TOKEN_HASH_PREFIX = 'sha256:'
const TOKEN_HASH = /^sha256:[0-9a-f]{64}$/

/** The 32-byte SHA-256 of a token. */
export function tokenDigest (token: string): Buffer {
  return createHash('sha256').update(token).digest()
}

/** "sha256:<hex>" of a token, as `lb hash-token` prints it and [[generation.keys]] hash takes it. */
export function tokenHash (token: string): string {
  return TOKEN_HASH_PREFIX + tokenDigest(token).toString('hex')
}

/** The digest written in a configured hash, or null when it is not "sha256:" and 64 lower-case hex digits. */
export function parseTokenHash (s: string): Buffer | null {
  return TOKEN_HASH.test(s) ? Buffer.from(s.slice(TOKEN_HASH_PREFIX.length), 'hex') : null
}

/**
 * The index of `got` among `digests`, or -1. Every entry is compared (no early exit), each in constant
 * time, so the answer time says nothing about which entry matched or how much of one did.
 */
export function findDigest (digests: readonly Buffer[], got: Buffer): number {
  let found = -1
  for (let i = 0; i < digests.length; i++) {
    if (timingSafeEqual(digests[i]!, got) && found < 0) found = i
  }
  return found
}
