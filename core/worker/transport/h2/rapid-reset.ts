// Rapid reset (CVE-2023-44487): streams a client resets before lb has answered
// them, counted per session with the token bucket nghttp2 itself applies
// (streamResetBurst, streamResetRate). nghttp2 ends such a session with a
// GOAWAY of its own, but tells node nothing: no log line, and on Node 20 the
// TCP connection stays open until http2.idle_timeout (RFC 9113 §5.4.1 says
// close it). Counting the same resets here lets lb log the abuser and close its
// connection at the same point.
import type http2 from 'node:http2'
import { now } from '../../../clock.js'

/** RST_STREAMs a client may send at once, then this many a second (nghttp2's own values, set on purpose in h2.ts). */
export const RESET_BURST = 1000
export const RESET_RATE = 33

const BUCKET = Symbol('lb.resets')
interface Bucket { tokens: number, at: number, readonly abuse: () => void }
type Watched = http2.Http2Session & { [BUCKET]?: Bucket }

/** Counts `session`'s client resets from now on; `abuse` runs once, when they empty the bucket. */
export function watchResets (session: http2.Http2Session, abuse: () => void): void {
  (session as Watched)[BUCKET] = { tokens: RESET_BURST, at: now(), abuse }
}

/** One stream of `session` reset by its client before lb answered it. */
export function clientReset (session: http2.Http2Session | undefined): void {
  const b = (session as Watched | undefined)?.[BUCKET]
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
