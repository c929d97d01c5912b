// The names of rate-table entries (core/shm/layout.ts RN_*): which rate limit
// an entry belongs to and the source it counts, as text. The table keys
// entries by hashes only; these records let the management surfaces list a
// limit's sources (`show table`). A worker writes one when it claims a way for
// a new source, under the set's lock: a few stores per new source, nothing per
// request. Keys are IP addresses (canonical text, perhaps with an IPv6 prefix
// length): ASCII, at most 43 characters; a longer or non-Latin-1 key is kept
// cut to RN_CHARS characters, '?' for a character above U+00FF.
import { RN_CHARS, RN_OWNER, RN_TEXT, RN_TEXT_WORDS, RN_WORDS } from './layout.js'

/** Records the owner and key of the way at `way` (global index) of the names region at `names`; owner 0 leaves it unnamed. */
export function writeName (i32: Int32Array, names: number, way: number, owner: number, key: string): void {
  const r = names + way * RN_WORDS
  i32[r + RN_OWNER] = owner
  if (owner === 0) return
  const n = key.length < RN_CHARS ? key.length : RN_CHARS
  // only the words up to the terminating NUL (a 15-character IPv4 key: 4 of 11), read back to it
  for (let w = 0; w < RN_TEXT_WORDS && w * 4 <= n; w++) {
    let word = 0
    for (let b = 0; b < 4; b++) {
      const i = w * 4 + b
      if (i >= n) break
      const c = key.charCodeAt(i)
      word |= (c > 0xff ? 0x3f : c) << (b * 8)
    }
    i32[r + RN_TEXT + w] = word
  }
}

/** The owner of a way's record (0 = unnamed). */
export function nameOwner (i32: Int32Array, names: number, way: number): number {
  return i32[names + way * RN_WORDS + RN_OWNER]!
}

/** The key text of a way's record (cut to RN_CHARS characters). */
export function nameText (i32: Int32Array, names: number, way: number): string {
  const r = names + way * RN_WORDS + RN_TEXT
  let s = ''
  for (let w = 0; w < RN_TEXT_WORDS; w++) {
    const word = i32[r + w]!
    for (let b = 0; b < 4; b++) {
      const c = (word >>> (b * 8)) & 0xff
      if (c === 0) return s
      s += String.fromCharCode(c)
    }
  }
  return s
}
