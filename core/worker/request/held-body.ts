// A request whose body was read whole before it goes on (the generation
// relay read it to decide: core/gen/edge/edge.ts): the proxy is handed the
// held body as its one and last chunk, as if the client had just sent it.
import type { ClientResponse } from '../transport/client.js'
import { ClientFilter } from './client-filter.js'
import type { Ctx, FilterHost } from './context.js'

export class HeldBody extends ClientFilter {
  readonly #body: Buffer

  /** `body`: the whole request body, Content-Length bytes (ctx's framing stays as the client sent it). */
  constructor (inner: ClientResponse, ctx: Ctx, host: FilterHost, body: Buffer) {
    super(inner, ctx, host)
    this.#body = body
  }

  override onBody (cb: (chunk: Buffer, last: boolean) => void): void { cb(this.#body, true) }
  override pauseBody (): void {}
  override resumeBody (): void {}
}
