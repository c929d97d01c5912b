// The media type of a body from its first bytes, as Go's http.DetectContentType
// (net/http/sniff.go, after the WHATWG MIME Sniffing Standard) finds it: what
// Traefik's contentType middleware lets Go's server set on a response that
// has none. The signatures are checked in Go's order over at most the first
// SNIFF_LEN bytes; the first match wins; text/plain when no byte is binary,
// application/octet-stream otherwise.

export const SNIFF_LEN = 512

const HTML = 'text/html; charset=utf-8'
const TEXT = 'text/plain; charset=utf-8'

/** Go's isWS: the whitespace skipped before HTML and XML signatures */
const isWS = (b: number): boolean => b === 0x09 || b === 0x0a || b === 0x0c || b === 0x0d || b === 0x20
/** a tag-terminating byte: space or '>' */
const isTT = (b: number): boolean => b === 0x20 || b === 0x3e

const bytes = (s: string): Uint8Array => Uint8Array.from(s, (c) => c.charCodeAt(0))

/** HTML openings: case-insensitive, after whitespace, then a tag-terminating byte */
const HTML_SIGS = ['<!DOCTYPE HTML', '<HTML', '<HEAD', '<SCRIPT', '<IFRAME', '<H1', '<DIV', '<FONT', '<TABLE', '<A', '<STYLE',
  '<TITLE', '<B', '<BODY', '<BR', '<P', '<!--'].map(bytes)

interface Masked { readonly mask: Uint8Array, readonly pat: Uint8Array, readonly skipWS: boolean, readonly type: string }

const masked = (mask: string, pat: string, type: string, skipWS = false): Masked => ({ mask: bytes(mask), pat: bytes(pat), skipWS, type })
const exact = (pat: string, type: string): Masked => masked('\xFF'.repeat(pat.length), pat, type)
const RIFF_MASK = '\xFF\xFF\xFF\xFF\x00\x00\x00\x00\xFF\xFF\xFF\xFF'

/** Go's signatures after the HTML ones, in its order; the MP4 check sits between webm's neighbours (see sniff) */
const BEFORE_MP4: readonly Masked[] = [
  masked('\xFF\xFF\xFF\xFF\xFF', '<?xml', 'text/xml; charset=utf-8', true),
  exact('%PDF-', 'application/pdf'),
  exact('%!PS-Adobe-', 'application/postscript'),
  masked('\xFF\xFF\x00\x00', '\xFE\xFF\x00\x00', 'text/plain; charset=utf-16be'),
  masked('\xFF\xFF\x00\x00', '\xFF\xFE\x00\x00', 'text/plain; charset=utf-16le'),
  masked('\xFF\xFF\xFF\x00', '\xEF\xBB\xBF\x00', TEXT),
  exact('\x00\x00\x01\x00', 'image/x-icon'),
  exact('\x00\x00\x02\x00', 'image/x-icon'),
  exact('BM', 'image/bmp'),
  exact('GIF87a', 'image/gif'),
  exact('GIF89a', 'image/gif'),
  masked(RIFF_MASK + '\xFF\xFF', 'RIFF\x00\x00\x00\x00WEBPVP', 'image/webp'),
  exact('\x89PNG\x0D\x0A\x1A\x0A', 'image/png'),
  exact('\xFF\xD8\xFF', 'image/jpeg'),
  masked(RIFF_MASK, 'FORM\x00\x00\x00\x00AIFF', 'audio/aiff'),
  exact('ID3', 'audio/mpeg'),
  exact('OggS\x00', 'application/ogg'),
  exact('MThd\x00\x00\x00\x06', 'audio/midi'),
  masked(RIFF_MASK, 'RIFF\x00\x00\x00\x00AVI ', 'video/avi'),
  masked(RIFF_MASK, 'RIFF\x00\x00\x00\x00WAVE', 'audio/wave'),
]

const AFTER_MP4: readonly Masked[] = [
  exact('\x1A\x45\xDF\xA3', 'video/webm'),
  masked('\x00'.repeat(34) + '\xFF\xFF', '\x00'.repeat(34) + 'LP', 'application/vnd.ms-fontobject'),
  exact('\x00\x01\x00\x00', 'font/ttf'),
  exact('OTTO', 'font/otf'),
  exact('ttcf', 'font/collection'),
  exact('wOFF', 'font/woff'),
  exact('wOF2', 'font/woff2'),
  exact('\x1F\x8B\x08', 'application/x-gzip'),
  exact('PK\x03\x04', 'application/zip'),
  exact('Rar!\x1A\x07\x00', 'application/x-rar-compressed'),
  exact('Rar!\x1A\x07\x01\x00', 'application/x-rar-compressed'),
  exact('\x00\x61\x73\x6D', 'application/wasm'),
]

function htmlAt (d: Uint8Array, at: number, end: number, sig: Uint8Array): boolean {
  if (end - at < sig.length + 1) return false
  for (let i = 0; i < sig.length; i++) {
    const b = sig[i]!
    let x = d[at + i]!
    if (b >= 0x41 && b <= 0x5a) x &= 0xdf // upper-case the data where the signature has a letter
    if (x !== b) return false
  }
  return isTT(d[at + sig.length]!)
}

function maskedAt (d: Uint8Array, at: number, end: number, s: Masked): boolean {
  if (end - at < s.pat.length) return false
  for (let i = 0; i < s.pat.length; i++) if ((d[at + i]! & s.mask[i]!) !== s.pat[i]) return false
  return true
}

/** An ISO base media file whose brands include one starting "mp4" (Go's mp4Sig). */
function isMp4 (d: Uint8Array, start: number, end: number): boolean {
  if (end - start < 12) return false
  const box = ((d[start]! << 24) | (d[start + 1]! << 16) | (d[start + 2]! << 8) | d[start + 3]!) >>> 0
  if (end - start < box || box % 4 !== 0) return false
  if (d[start + 4] !== 0x66 || d[start + 5] !== 0x74 || d[start + 6] !== 0x79 || d[start + 7] !== 0x70) return false // "ftyp"
  for (let st = 8; st < box; st += 4) {
    if (st === 12) continue // the minor version, not a brand
    if (d[start + st] === 0x6d && d[start + st + 1] === 0x70 && d[start + st + 2] === 0x34) return true // "mp4"
  }
  return false
}

function isBinary (b: number): boolean {
  return b <= 0x08 || b === 0x0b || (b >= 0x0e && b <= 0x1a) || (b >= 0x1c && b <= 0x1f)
}

/** The media type of the body that starts with d[start, end) (Go's DetectContentType); at most SNIFF_LEN bytes are read. */
export function sniff (d: Uint8Array, start = 0, end = d.length): string {
  if (end - start > SNIFF_LEN) end = start + SNIFF_LEN
  let ws = start
  while (ws < end && isWS(d[ws]!)) ws++
  for (const sig of HTML_SIGS) if (htmlAt(d, ws, end, sig)) return HTML
  for (const s of BEFORE_MP4) if (maskedAt(d, s.skipWS ? ws : start, end, s)) return s.type
  if (isMp4(d, start, end)) return 'video/mp4'
  for (const s of AFTER_MP4) if (maskedAt(d, start, end, s)) return s.type
  for (let i = ws; i < end; i++) if (isBinary(d[i]!)) return 'application/octet-stream'
  return TEXT
}
