// htpasswd entries: parsing "user:hash" lines and checking a password against
// a hash, for the formats Apache's htpasswd writes that are worth accepting:
// bcrypt ($2y$, $2b$, $2a$; htpasswd -B), apr1 MD5 ($apr1$; htpasswd -m, its
// default, and the $1$ MD5-crypt it derives from) and {SHA} (htpasswd -s).
// crypt(3) DES, SHA-crypt ($5$/$6$) and plain text are refused at load.
//
// Every comparison of secrets is constant-time: the digest of the candidate is
// compared with crypto.timingSafeEqual (bcryptjs compares its own hashes in
// constant time).
import { createHash, hash, timingSafeEqual } from 'node:crypto'
import { bcryptCompare } from './bcrypt-thread.js'

export const KINDS = ['bcrypt', 'apr1', 'md5crypt', 'sha1'] as const
export type HashKind = typeof KINDS[number]

export interface HtpasswdEntry {
  readonly user: string
  readonly hash: string
  readonly kind: HashKind
}

const BCRYPT = /^\$2[aby]\$(0[4-9]|[12]\d|3[01])\$[./A-Za-z0-9]{53}$/
const MD5CRYPT = /^\$(apr1|1)\$([^$]{1,8})\$[./0-9A-Za-z]{22}$/
const SHA1 = /^\{SHA\}[A-Za-z0-9+/]{27}=$/

/** The kind of a hash, or a sentence saying why it is not accepted. */
export function hashKind (hash: string): HashKind | string {
  if (BCRYPT.test(hash)) return 'bcrypt'
  const m = MD5CRYPT.exec(hash)
  if (m !== null) return m[1] === 'apr1' ? 'apr1' : 'md5crypt'
  if (SHA1.test(hash)) return 'sha1'
  if (/^\$[56]\$/.test(hash)) return 'a SHA-crypt hash (htpasswd -2/-5), which is not supported'
  if (/^\$2[aby]\$/.test(hash) || hash.startsWith('$apr1$') || hash.startsWith('{SHA}')) return 'a malformed hash'
  if (/^[./0-9A-Za-z]{13}$/.test(hash)) return 'a crypt(3) DES hash (htpasswd -d), which is not supported'
  return 'a plain-text password or an unknown hash (htpasswd -p is not supported)'
}

/**
 * Parses one "user:hash" line; returns the entry or a problem sentence that
 * never repeats the hash (it is a secret's derivative).
 */
export function parseEntry (line: string): HtpasswdEntry | string {
  const colon = line.indexOf(':')
  if (colon <= 0) return 'expected "user:hash" as written by htpasswd'
  const user = line.slice(0, colon)
  const hash = line.slice(colon + 1).trim()
  const kind = hashKind(hash)
  if (!(KINDS as readonly string[]).includes(kind)) {
    return `user ${JSON.stringify(user)} has ${kind}; expected a hash made by htpasswd -B (bcrypt $2y$), -m (apr1 MD5) or -s ({SHA})`
  }
  return { user, hash, kind: kind as HashKind }
}

const ITOA64 = './0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

function to64 (v: number, n: number): string {
  let s = ''
  for (; n > 0; n--, v >>>= 6) s += ITOA64[v & 0x3f]
  return s
}

/** MD5-crypt (Poul-Henning Kamp's, as Apache's apr1 with magic "$apr1$"): "$magic$salt$hash". */
export function md5crypt (password: string, salt: string, magic: string): string {
  const pw = Buffer.from(password, 'utf8')
  const s = Buffer.from(salt, 'utf8')
  const alt = createHash('md5').update(pw).update(s).update(pw).digest()
  const ctx = createHash('md5').update(pw).update(magic).update(s)
  for (let i = pw.length; i > 0; i -= 16) ctx.update(alt.subarray(0, Math.min(16, i)))
  for (let i = pw.length; i > 0; i >>= 1) ctx.update((i & 1) !== 0 ? Buffer.of(0) : pw.subarray(0, 1))
  let f: Buffer = ctx.digest()
  // 1000 rounds, each hashing a concatenation assembled in one reused buffer
  // with one-shot crypto.hash (a Hash object per round costs about 4× more)
  const buf = Buffer.allocUnsafe(2 * pw.length + s.length + 16)
  for (let i = 0; i < 1000; i++) {
    let n = ((i & 1) !== 0 ? pw : f).copy(buf, 0)
    if (i % 3 !== 0) n += s.copy(buf, n)
    if (i % 7 !== 0) n += pw.copy(buf, n)
    n += ((i & 1) !== 0 ? f : pw).copy(buf, n)
    f = hash('md5', buf.subarray(0, n), 'buffer') as unknown as Buffer
  }
  const b = (x: number, y: number, z: number): number => (f[x]! << 16) | (f[y]! << 8) | f[z]!
  return magic + salt + '$' + to64(b(0, 6, 12), 4) + to64(b(1, 7, 13), 4) + to64(b(2, 8, 14), 4) +
    to64(b(3, 9, 15), 4) + to64(b(4, 10, 5), 4) + to64(f[11]!, 2)
}

function sameBytes (a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  // lengths are fixed by the format; a length difference reveals nothing about the secret
  return x.length === y.length && timingSafeEqual(x, y)
}

/** Synchronous check for the cheap kinds (apr1, MD5-crypt, SHA-1); null for bcrypt (use verifyAsync). */
export function verifySync (e: HtpasswdEntry, password: string): boolean | null {
  switch (e.kind) {
    case 'bcrypt': return null
    case 'apr1':
    case 'md5crypt': {
      const magic = e.kind === 'apr1' ? '$apr1$' : '$1$'
      const salt = e.hash.slice(magic.length, e.hash.indexOf('$', magic.length))
      return sameBytes(md5crypt(password, salt, magic), e.hash)
    }
    case 'sha1':
      return sameBytes('{SHA}' + createHash('sha1').update(password, 'utf8').digest('base64'), e.hash)
  }
}

/** bcrypt, on a thread of its own (bcrypt-thread.ts); rejects with LB_ERR_AUTH_BUSY when too many checks wait. */
export function verifyAsync (e: HtpasswdEntry, password: string): Promise<boolean> {
  return bcryptCompare(password, e.hash)
}

/**
 * An entry of the same kind and cost that no password matches: checking an
 * unknown user against it costs what checking a real one does, so response
 * times do not tell which user names exist.
 */
export function decoyOf (e: HtpasswdEntry): HtpasswdEntry {
  const last = e.hash[e.hash.length - 2] === '.' ? '/' : '.'
  return { user: '', hash: e.hash.slice(0, -2) + last + e.hash.slice(-1), kind: e.kind }
}
