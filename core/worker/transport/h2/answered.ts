// HTTP/2 streams answered in full whose last frames may still wait for a
// window the client does not open. A stream is reset after timeouts.client
// with no frame either way (h2.ts #watch), but a timer on every stream (made,
// refreshed on every frame, cleared) cost a small GET about a sixth of its CPU
// (bench/RESULTS.md, "HTTP/2 and gRPC"). So a stream gets its timer only
// while the client holds it up: a body to come, a write refused, or, found
// here, an answer still not out a second after it was handed to node:http2.
// Members leave at the stream's 'close', within milliseconds of the answer for
// nearly all; the sweep runs only while there are members.
import { now } from '../../../clock.js'
import { type Indexed, IndexedSet } from '../../../indexed-set.js'

/** how often members are looked at, and how long one may stay before it is watched (ms) */
export const LINGER_MS = 1000

export interface Answered extends Indexed {
  /** The sweep, at tick `t`: a member answered LINGER_MS ago or more leaves (dropAnswered) and gets its timer. */
  lingering (t: number): void
}

const members = new IndexedSet<Answered>()
let sweeper: NodeJS.Timeout | null = null

function sweep (): void {
  const t = now()
  const items = members.items
  // backwards: a member that leaves is replaced by the last one, already seen
  for (let i = items.length - 1; i >= 0; i--) items[i]!.lingering(t)
  if (members.size === 0 && sweeper !== null) {
    clearInterval(sweeper)
    sweeper = null
  }
}

export function holdAnswered (x: Answered): void {
  members.add(x)
  sweeper ??= setInterval(sweep, LINGER_MS).unref()
}

export function dropAnswered (x: Answered): void {
  members.delete(x)
}
