// IP address text ↔ 16-byte form, and CIDR matching for allow lists. IPv4 is
// held as an IPv4-mapped IPv6 address (::ffff:a.b.c.d), so one matcher serves both.
import { isIPv4, isIPv6 } from 'node:net'

/** Parses an IPv4 or IPv6 address into 16 bytes; null when it is not an address. */
export function parseIp (s: string): Uint8Array | null {
  if (isIPv4(s)) {
    const out = new Uint8Array(16)
    out[10] = 0xff
    out[11] = 0xff
    s.split('.').forEach((p, i) => { out[12 + i] = Number(p) })
    return out
  }
  if (!isIPv6(s)) return null
  let text = s
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  let tail: number[] = []
  if (v4 !== null) {
    tail = v4[1]!.split('.').map(Number)
    text = text.slice(0, -v4[1]!.length) + '0:0'
  }
  const [head, rest] = text.split('::') as [string, string | undefined]
  const hs = head === '' ? [] : head.split(':')
  const rs = rest === undefined || rest === '' ? [] : rest.split(':')
  const groups = rest === undefined ? hs : [...hs, ...new Array<string>(8 - hs.length - rs.length).fill('0'), ...rs]
  const out = new Uint8Array(16)
  groups.forEach((g, i) => {
    const v = parseInt(g, 16)
    out[i * 2] = v >> 8
    out[i * 2 + 1] = v & 0xff
  })
  if (tail.length === 4) out.set(tail, 12)
  return out
}

/** True for an IPv4-mapped IPv6 address (::ffff:a.b.c.d), the 16-byte form parseIp gives IPv4. */
export function isMappedV4 (b: Uint8Array): boolean {
  for (let i = 0; i < 10; i++) if (b[i] !== 0) return false
  return b[10] === 0xff && b[11] === 0xff
}

/** Canonical text: dotted IPv4 for IPv4 and IPv4-mapped addresses, compressed IPv6 otherwise. */
export function formatIp (b: Uint8Array): string {
  if (isMappedV4(b)) return `${b[12]}.${b[13]}.${b[14]}.${b[15]}`
  const g: number[] = []
  for (let i = 0; i < 16; i += 2) g.push((b[i]! << 8) | b[i + 1]!)
  // longest run of zero groups (length >= 2) becomes "::" (RFC 5952)
  let bestAt = -1
  let bestLen = 1
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) { i++; continue }
    let j = i
    while (j < 8 && g[j] === 0) j++
    if (j - i > bestLen) { bestAt = i; bestLen = j - i }
    i = j
  }
  const hex = g.map((x) => x.toString(16))
  if (bestAt < 0) return hex.join(':')
  return `${hex.slice(0, bestAt).join(':')}::${hex.slice(bestAt + bestLen).join(':')}`
}

/** Normalises whatever text uWS reports for a peer (long-form IPv6, mapped IPv4) to canonical text. */
export function canonicalIp (s: string): string {
  if (!s.includes(':')) return s // dotted IPv4 is already canonical (the common case, per request)
  const b = parseIp(s)
  return b === null ? s : formatIp(b)
}

/**
 * The IPv6 network of `addr` (canonical text) to `bits` leading bits, as "net/bits": one IPv6 subscriber holds a
 * whole /64 or more and may send from any address in it (RFC 6177). IPv4 and IPv4-mapped addresses come back as
 * they are, without work for a dotted one.
 */
export function ipv6Prefix (addr: string, bits: number): string {
  if (bits >= 128 || !addr.includes(':')) return addr
  const b = parseIp(addr)
  if (b === null || isMappedV4(b)) return addr
  for (let i = 0; i < 16; i++) {
    const keep = bits - i * 8
    if (keep <= 0) b[i] = 0
    else if (keep < 8) b[i] = b[i]! & (0xff << (8 - keep))
  }
  return `${formatIp(b)}/${bits}`
}

export interface Cidr { readonly bytes: Uint8Array, readonly bits: number }

/** "10.0.0.0/8", "::1", "2001:db8::/32" → Cidr; null when malformed. */
export function parseCidr (s: string): Cidr | null {
  const slash = s.indexOf('/')
  const addr = slash < 0 ? s : s.slice(0, slash)
  const bytes = parseIp(addr)
  if (bytes === null) return null
  const v4 = isIPv4(addr)
  const max = v4 ? 32 : 128
  const bits = slash < 0 ? max : Number(s.slice(slash + 1))
  if (!Number.isInteger(bits) || bits < 0 || bits > max || (slash >= 0 && !/^\d+$/.test(s.slice(slash + 1)))) return null
  return { bytes, bits: v4 ? bits + 96 : bits }
}

export function cidrContains (c: Cidr, ip: Uint8Array): boolean {
  let bits = c.bits
  for (let i = 0; i < 16 && bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff
    if ((c.bytes[i]! & mask) !== (ip[i]! & mask)) return false
  }
  return true
}

/**
 * Compiles a list of CIDRs into a predicate over address text; unparsable
 * client text never matches. This is the one address matcher (status page
 * `allow`, ipAllowList, trusted proxies). Dotted IPv4 text against IPv4 CIDRs,
 * the per-request common case, is matched as 32-bit integers without allocating.
 */
export function allowList (cidrs: readonly Cidr[]): (ip: string) => boolean {
  const v4: number[] = [] // [net, mask, ...] of CIDRs inside ::ffff:0:0/96
  let allV4 = true
  for (const c of cidrs) {
    if (c.bits < 96 || !isMappedV4(c.bytes)) {
      allV4 = false
      continue
    }
    const bits = c.bits - 96
    const mask = bits === 0 ? 0 : (-1 << (32 - bits)) | 0
    v4.push(((c.bytes[12]! << 24) | (c.bytes[13]! << 16) | (c.bytes[14]! << 8) | c.bytes[15]!) & mask, mask)
  }
  return (ip) => {
    const n = dottedIpv4(ip)
    if (n !== -1) {
      for (let i = 0; i < v4.length; i += 2) if ((n & v4[i + 1]!) === v4[i]) return true
      if (allV4) return false // otherwise an IPv6 CIDR (say ::/0) may still match, below
    }
    // IPv6 text (the per-request case of an IPv6 client) is read into a scratch buffer: no allocation
    const b = ip.indexOf(':') >= 0 ? (ipv6Into(ip, scratch) ? scratch : null) : parseIp(ip)
    if (b === null) return false
    for (let i = 0; i < cidrs.length; i++) if (cidrContains(cidrs[i]!, b)) return true
    return false
  }
}

/** allowList's buffer for the address being matched (a thread matches one address at a time). */
const scratch = new Uint8Array(16)

function hexDigit (c: number): number {
  if (c >= 48 && c <= 57) return c - 48
  const l = c | 0x20
  return l >= 97 && l <= 102 ? l - 87 : -1
}

/** Dotted IPv4 text at s[from..] to its end into out[at..at + 3]; false when it is not that. */
function v4Into (s: string, from: number, out: Uint8Array, at: number): boolean {
  let octet = 0
  let digits = 0
  let k = at
  for (let i = from; i <= s.length; i++) {
    const c = i < s.length ? s.charCodeAt(i) : 46
    if (c === 46) {
      if (digits === 0 || k > at + 3) return false
      out[k++] = octet
      octet = 0
      digits = 0
    } else if (c >= 48 && c <= 57 && digits < 3) {
      octet = octet * 10 + c - 48
      digits++
      if (octet > 255) return false
    } else return false
  }
  return k === at + 4
}

/**
 * IPv6 text (RFC 4291 §2.2: hex groups, one "::", an optional dotted IPv4
 * tail; no zone index) into `out`, without allocating; false when it is not
 * an IPv6 address.
 */
export function ipv6Into (s: string, out: Uint8Array): boolean {
  const n = s.length
  let g = 0 // 16-bit groups written
  let gap = -1 // the group index where "::" stands
  let i = 0
  if (n >= 2 && s.charCodeAt(0) === 58 && s.charCodeAt(1) === 58) {
    gap = 0
    i = 2
  }
  while (i < n) {
    let v = 0
    let j = i
    while (j < n && j - i < 5) {
      const h = hexDigit(s.charCodeAt(j))
      if (h < 0) break
      v = v * 16 + h
      j++
    }
    if (j < n && s.charCodeAt(j) === 46) { // the dotted IPv4 tail: the last 32 bits
      if (g > 6 || !v4Into(s, i, out, g * 2)) return false
      g += 2
      break
    }
    if (j === i || j - i > 4 || g >= 8) return false
    out[g * 2] = v >> 8
    out[g * 2 + 1] = v & 0xff
    g++
    if (j === n) break
    if (s.charCodeAt(j) !== 58 || j + 1 === n) return false
    i = j + 1
    if (s.charCodeAt(i) === 58) {
      if (gap >= 0) return false
      gap = g
      i++
    }
  }
  if (gap < 0) return g === 8
  if (g === 8) return false
  const tail = g - gap // groups after the "::", moved to the end
  for (let k = 15, m = g * 2 - 1; k >= 16 - tail * 2; k--, m--) out[k] = out[m]!
  for (let k = gap * 2; k < 16 - tail * 2; k++) out[k] = 0
  return true
}

/** "a.b.c.d" (no leading zeros) → its 32 bits as a signed integer; -1 when not that form (255.255.255.255 falls back too). */
function dottedIpv4 (s: string): number {
  let n = 0
  let octet = 0
  let digits = 0
  let dots = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c === 46) {
      if (digits === 0 || dots === 3) return -1
      n = (n << 8) | octet
      octet = 0
      digits = 0
      dots++
    } else if (c >= 48 && c <= 57) {
      if (digits > 0 && octet === 0) return -1 // leading zero
      octet = octet * 10 + c - 48
      if (++digits > 3 || octet > 255) return -1
    } else return -1
  }
  if (dots !== 3 || digits === 0) return -1
  return (n << 8) | octet
}
