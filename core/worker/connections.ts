// Client connections of one worker, counted as they open and close: uWS
// reports both for HTTP (App.filter: +1 on open, -1 on close; an upgraded
// WebSocket's close comes through its own close handler instead), node:net
// for TCP entry points. These counts are stub_status accepts/handled/active,
// HAProxy CumConns/CurrConns and FRONTEND scur/stot, and the lb_connections_*
// metrics.
//
// global.max_connections holds per connection: the shared open count is
// raised with one atomic add, which also tells whether this connection went
// over the cap; such a connection is closed at once by the caller (nginx's
// worker_connections does the same: "accepts" counts it, "handled" does not).
//
// Invariant: every open() is followed by exactly one close(), refused
// connections included, so H_CONN_ACTIVE is the number of connections open.
import { type Shm, G_ACCEPTS, G_CONN_OPEN, G_REFUSED, H_CONN_ACTIVE, stripeBase } from '../shm/layout.js'

export class Connections {
  readonly #i32: Int32Array
  readonly #f64: Float64Array
  readonly #base: number
  readonly #max: number

  /** `stripe`: this worker's counter stripe; `max`: global.max_connections. */
  constructor (shm: Shm, stripe: number, max: number) {
    this.#i32 = shm.i32
    this.#f64 = shm.f64
    this.#base = stripeBase(stripe)
    this.#max = max
  }

  /** A connection opened; false when it is over the cap: close it now (its close() still follows). */
  open (): boolean {
    this.#f64[this.#base + G_ACCEPTS]! += 1
    this.#f64[this.#base + G_CONN_OPEN]! += 1
    if (Atomics.add(this.#i32, H_CONN_ACTIVE, 1) < this.#max) return true
    this.#f64[this.#base + G_REFUSED]! += 1
    return false
  }

  close (): void {
    this.#f64[this.#base + G_CONN_OPEN]! -= 1
    Atomics.sub(this.#i32, H_CONN_ACTIVE, 1)
  }
}
