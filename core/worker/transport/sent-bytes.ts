// Bytes written to the clients of one entry point beyond response bodies:
// response heads as uWS puts them on the wire and chunk framing. Bodies are
// counted per request (Ctx.bytesOut, core/shm/request-stats.ts); these are
// added as the writes happen, inside the cork, so before the bytes leave.
// They go to the entry point's T_HEAD_OUT (FRONTEND bout = bodies + this)
// and to G_BYTES_OUT (show info TotalBytesOut, BytesOutRate), never to the
// Prometheus byte counters, which count bodies as Traefik's do.
import { type Shm, stripeBase } from '../../shm/layout.js'
import { recordSent } from '../../shm/request-stats.js'
import type { SentCounter } from './listen-options.js'

export class SentBytes implements SentCounter {
  readonly #f64: Float64Array
  readonly #base: number
  readonly #ep: number

  /** `stripe`: this worker's counter stripe; `ep`: the entry point's index in the config (Ctx.epSlot). */
  constructor (shm: Shm, stripe: number, ep: number) {
    this.#f64 = shm.f64
    this.#base = stripeBase(stripe)
    this.#ep = ep
  }

  add (bytes: number): void {
    recordSent(this.#f64, this.#base, this.#ep, bytes)
  }
}
