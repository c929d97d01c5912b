// Bytes written to the clients of one entry point beyond response bodies:
// response heads as uWS puts them on the wire and chunk framing. Bodies are
// counted per request (Ctx.bytesOut, core/shm/request-stats.ts); these are
// added as the writes happen, inside the cork, so before the bytes leave.
// They go to the entry point's T_HEAD_OUT (FRONTEND bout = bodies + this)
// and to G_BYTES_OUT (show info TotalBytesOut, BytesOutRate), never to the
// Prometheus byte counters, which count bodies as Traefik's do.
import { type Shm, G_BYTES_OUT, TIME_BLOCK, TIME_BLOCKS_BASE, T_HEAD_OUT, stripeBase } from '../shm/layout.js'
import { epRow } from '../shm/request-stats.js'
import type { SentCounter } from './http.js'

export class SentBytes implements SentCounter {
  readonly #f64: Float64Array
  readonly #global: number
  readonly #frontend: number

  /** `stripe`: this worker's counter stripe; `ep`: the entry point's index in the config (Ctx.epSlot). */
  constructor (shm: Shm, stripe: number, ep: number) {
    const base = stripeBase(stripe)
    this.#f64 = shm.f64
    this.#global = base + G_BYTES_OUT
    this.#frontend = base + TIME_BLOCKS_BASE + epRow(ep) * TIME_BLOCK + T_HEAD_OUT
  }

  add (bytes: number): void {
    this.#f64[this.#global]! += bytes
    this.#f64[this.#frontend]! += bytes
  }
}
