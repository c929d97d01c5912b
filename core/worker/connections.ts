// Client connections of one worker on one entry point, counted as they open
// and close: uWS reports both for HTTP (App.filter: +1 on open, -1 on close; an
// upgraded WebSocket's close comes through its own close handler instead),
// node:net for the node engine, tcp and h2c entry points and the h2 sessions
// of terminated https ones. These counts are stub_status accepts/handled/active,
// HAProxy CumConns/CurrConns, the entry point's FRONTEND scur/smax/stot, and the
// lb_connections_* metrics.
//
// global.max_connections holds per connection, over every entry point: the
// shared open count is raised with one atomic add, which also tells whether
// this connection went over the cap; such a connection is closed at once by
// the caller (nginx's worker_connections does the same: "accepts" counts it,
// "handled" does not).
//
// Invariant: every open() is followed by exactly one close(), refused
// connections included, so H_CONN_ACTIVE is the number of connections open,
// and each entry point's EC_OPEN its share of them.
import { type Shm, EC_OPEN, EC_PEAK, EP_ACCEPTS, EP_OPEN, G_ACCEPTS, G_CONN_OPEN, G_REFUSED, H_CONN_ACTIVE, stripeBase } from '../shm/layout.js'
import { epConnBase, epCounterBase } from '../shm/counters.js'

export class Connections {
  readonly #i32: Int32Array
  readonly #f64: Float64Array
  readonly #base: number
  /** this entry point's counters in this worker's stripe (EP_*) */
  readonly #ep: number
  /** this entry point's shared words (EC_*) */
  readonly #shared: number
  readonly #max: number

  /** `stripe`: this worker's counter stripe; `ep`: the entry point's index in the config; `max`: global.max_connections. */
  constructor (shm: Shm, stripe: number, ep: number, max: number) {
    this.#i32 = shm.i32
    this.#f64 = shm.f64
    this.#base = stripeBase(stripe)
    this.#ep = epCounterBase(stripe, ep)
    this.#shared = epConnBase(ep)
    this.#max = max
  }

  /** A connection opened; false when it is over the cap: close it now (its close() still follows). */
  open (): boolean {
    const f64 = this.#f64
    f64[this.#base + G_ACCEPTS]! += 1
    f64[this.#base + G_CONN_OPEN]! += 1
    f64[this.#ep + EP_ACCEPTS]! += 1
    f64[this.#ep + EP_OPEN]! += 1
    const open = Atomics.add(this.#i32, this.#shared + EC_OPEN, 1) + 1
    if (Atomics.add(this.#i32, H_CONN_ACTIVE, 1) < this.#max) {
      this.#peak(open)
      return true
    }
    f64[this.#base + G_REFUSED]! += 1
    return false
  }

  close (): void {
    this.#f64[this.#base + G_CONN_OPEN]! -= 1
    this.#f64[this.#ep + EP_OPEN]! -= 1
    Atomics.sub(this.#i32, this.#shared + EC_OPEN, 1)
    Atomics.sub(this.#i32, H_CONN_ACTIVE, 1)
  }

  /** Raises the entry point's peak to `open` (HAProxy's smax is exact: so is this, across workers). */
  #peak (open: number): void {
    const i = this.#shared + EC_PEAK
    for (let p = Atomics.load(this.#i32, i); open > p; p = Atomics.load(this.#i32, i)) {
      if (Atomics.compareExchange(this.#i32, i, p, open) === p) return
    }
  }
}
