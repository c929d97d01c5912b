// Coalesces one job's streamed pieces before they leave the worker thread.
//
// Every hop of a piece (worker -> runner thread -> IPC -> API process -> socket
// -> client) wakes a thread and costs a system call or two. At a thousand
// tokens per second that overhead competes with decoding for the same cores.
// So a piece is sent at once when the previous send is at least `flushMs` old
// (the first piece of a reply is never held back: time to first token), and
// otherwise waits until `flushMs` have passed, together with those that follow.
// Each piece is still its own NDJSON line for the client; only the transport
// is batched. The added latency per piece is below `flushMs` (config
// stream_batch), and a model slower than one piece per `flushMs` is never
// delayed at all.

import { performance } from 'node:perf_hooks' // the global `performance` is a lazy accessor: a getter call on every use
import type { MessagePort } from 'node:worker_threads'
import type { FromTask } from '../protocol.js'

export class PieceBuffer {
  private readonly id: number
  private readonly port: MessagePort
  private readonly flushMs: number
  private texts: string[] = []
  private last = 0
  private timer: NodeJS.Timeout | null = null

  constructor (id: number, port: MessagePort, flushMs: number) {
    this.id = id
    this.port = port
    this.flushMs = flushMs
  }

  push (text: string): void {
    this.texts.push(text)
    if (this.timer !== null) return
    const wait = this.last + this.flushMs - performance.now()
    if (wait <= 0) this.flush()
    else this.timer = setTimeout(() => this.flush(), wait)
  }

  /** Sends what is pending; called for each timer and before the job's end. */
  flush (): void {
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    if (this.texts.length === 0) return
    this.last = performance.now()
    this.port.postMessage({ type: 'pieces', id: this.id, texts: this.texts } satisfies FromTask)
    this.texts = []
  }
}
