// A proxied response body through the transform an onResponse hook set
// (compress): upstream bytes are written into it, its output goes to the
// client. Backpressure both ways: a full transform input pauses the upstream
// socket (write answers false) until 'drain'; a client that cannot take more
// pauses the transform's output until it drains. The client's response ends
// when the transform's output does.
import type { Transform } from 'node:stream'
import type { ClientResponse } from '../transport/client.js'

export interface TransformOwner {
  /** the transform's output ended: count the request, before the client can see its end */
  transformEnded (): void
  /** the transform failed: the head is out, so the client's connection is to be cut */
  transformFailed (err: Error): void
  /** the transform takes input again after write() answered false: resume reading the upstream */
  transformDrained (): void
}

export class TransformedBody {
  readonly #tf: Transform
  readonly #owner: TransformOwner
  /** a 'drain' listener is already waiting to resume the upstream */
  #waiting = false

  constructor (tf: Transform, client: ClientResponse, owner: TransformOwner) {
    this.#tf = tf
    this.#owner = owner
    tf.on('data', (chunk: Buffer) => {
      if (client.body(chunk, 0, chunk.length)) return
      tf.pause() // the client kept the chunk; nothing more until it drains
      client.onDrain(() => tf.resume())
    })
    tf.once('end', () => {
      owner.transformEnded()
      client.end()
    })
    tf.once('error', (err: Error) => owner.transformFailed(err))
  }

  /** Takes upstream bytes (copied: `buf` is the connection's reused read buffer); false: transformDrained follows. */
  write (buf: Buffer, start: number, end: number): boolean {
    const tf = this.#tf
    if (tf.write(Buffer.from(buf.subarray(start, end)))) return true
    if (!this.#waiting) {
      this.#waiting = true
      tf.once('drain', () => {
        this.#waiting = false
        this.#owner.transformDrained()
      })
    }
    return false
  }

  /** The upstream body is complete: the transform flushes, then ends the client's response. */
  end (): void { this.#tf.end() }

  /** No-op after its end; frees zlib memory on an abort. */
  destroy (): void { this.#tf.destroy() }
}
