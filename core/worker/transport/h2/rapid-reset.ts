// Rapid reset (CVE-2023-44487): streams a client resets before lb has answered
// them, counted per session with the token bucket nghttp2 itself applies
// (streamResetBurst, streamResetRate). nghttp2 ends such a session with a
// GOAWAY of its own, but tells node nothing: no log line, and on Node 20 the
// TCP connection stays open until http2.idle_timeout (RFC 9113 §5.4.1 says
// close it). Counting the same resets here lets lb log the abuser and close its
// connection at the same point.
import { now } from '../../../clock.js'

/** RST_STREAMs a client may send at once, then this many a second (nghttp2's own values, set on purpose in h2.ts). */
export const RESET_BURST = 1000
export const RESET_RATE = 33

interface Bucket { tokens: number, at: number, readonly abuse: () => void }
/** by session (node:http2's, which only h2.ts touches) */
const buckets = new WeakMap<object, Bucket>()

/** Counts `session`'s client resets from now on; `abuse` runs once, when they empty the bucket. */
export function watchResets (session: object, abuse: () => void): void {
  buckets.set(session, { tokens: RESET_BURST, at: now(), abuse })
}

/** One stream of `session` reset by its client before lb answered it. */
export function clientReset (session: object | undefined): void {
  const b = session === undefined ? undefined : buckets.get(session)
  if (b === undefined || b.tokens === -Infinity) return
  const t = now()
  b.tokens = Math.min(RESET_BURST, b.tokens + ((t - b.at) | 0) * RESET_RATE / 1000) // ticks are 32-bit (clock.ts)
  b.at = t
  // at the burst's last token, where nghttp2 fails the next reset: the stream that reset is not always
  // reported to lb (on Node 20 it stays open with its session), so waiting for one more could wait for ever
  if (--b.tokens < 1) {
    b.tokens = -Infinity // once
    b.abuse()
  }
}
