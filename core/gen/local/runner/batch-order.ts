// Creates llama contexts whose concurrent sequences llama.cpp decodes in one
// forward pass per token, which is what makes batching pay: a pass reads every
// weight once, whatever the number of sequences in it.
//
// Two things in node-llama-cpp 3.22.1 split a batch into several passes:
// 1. Contexts are created with kv_unified = false: each sequence has its own KV
//    stream, and llama.cpp then puts into one ubatch only a run of consecutive
//    sequence ids in increasing order (llama_batch_allocr::split_equal,
//    "sequential"). node-llama-cpp queues items in the order the sequences
//    asked, i.e. when their sampling finished, which is random. Fix: the batch
//    items are sorted by sequence id, and model-host.ts leases the lowest free
//    id, which keeps the busy ids of a context consecutive.
// 2. While a pass runs, the sequences whose tokens were sampled first queue
//    their next token and are decoded on their own as soon as the pass ends;
//    the others then form a second group, and the two groups alternate for the
//    rest of the replies (seen as alternating batches of 1 and 7). Fix: a token
//    request is held until every active sequence of the context has asked, or
//    until no pass of this context is running (then after one event-loop turn,
//    so that requests arriving together still go together). A single stream is
//    never held.
// Measured on a 110 MB f32 model, one thread, 8 sequences: 37-46 ms per batch in
// queue order, 19 ms sorted (but alternating groups), 8 ms for one sequence alone.

import { readFileSync } from 'node:fs'
import type { BatchItem, LlamaContext, LlamaModel, PrioritizedBatchItem } from 'node-llama-cpp'

/**
 * The only node-llama-cpp whose internals this file was written against
 * (package.json pins it). Another version gets plain contexts, so an upgrade
 * degrades batching instead of breaking decoding; re-measure before extending.
 */
const KNOWN_VERSION = '3.22.1'
const installed = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.resolve('node-llama-cpp')), 'utf8')) as { version: string }).version

/** The internals of node-llama-cpp 3.22.1 used here: the decode queue (the batch items are built from it, in its order) and the call that fills it. */
interface Internals {
  _queuedDecodes?: ReadonlyArray<{ sequenceId?: number }>
  _decodeTokens?: (...args: unknown[]) => Promise<unknown>
}

/**
 * node-llama-cpp's "maximumParallelism" split (an equal share of the batch for
 * every item, the rest to the first ones), over the items sorted by sequence
 * id. Keeps queue order if the internal queue does not match `items`.
 */
function bySequence (ctx: Internals | null, items: readonly BatchItem[], size: number): PrioritizedBatchItem[] {
  const queue = ctx?._queuedDecodes
  let order = items.map((item, i) => ({ item, id: i }))
  if (queue !== undefined && queue.length === items.length && queue.every((q) => typeof q.sequenceId === 'number')) {
    order = items.map((item, i) => ({ item, id: queue[i]!.sequenceId! })).sort((a, b) => a.id - b.id)
  }
  const share = Math.max(1, Math.floor(size / items.length))
  let left = size
  const out: PrioritizedBatchItem[] = []
  for (const { item } of order) {
    const n = Math.min(item.tokens.length, share, left)
    if (n <= 0) break
    out.push({ item, processAmount: n })
    left -= n
  }
  for (const p of out) {
    if (left <= 0) break
    const more = Math.min(p.item.tokens.length - p.processAmount, left)
    p.processAmount += more
    left -= more
  }
  return out
}

/** Holds a context's token requests until they can go as one batch (point 2 above). Returns the re-check to call when `active()` drops. */
function gather (ctx: Internals, active: () => number): () => void {
  const decode = ctx._decodeTokens
  if (typeof decode !== 'function') return () => undefined
  const original = decode.bind(ctx)
  let held: Array<{ args: unknown[], resolve: (v: unknown) => void, reject: (e: unknown) => void }> = []
  let inFlight = 0
  let turnScheduled = false
  const settle = (): void => { inFlight--; check() }
  const release = (): void => {
    const batch = held
    held = []
    for (const h of batch) {
      inFlight++
      original(...h.args).then((v) => { settle(); h.resolve(v) }, (e: unknown) => { settle(); h.reject(e) })
    }
  }
  const check = (): void => {
    if (held.length === 0) return
    if (held.length >= active()) { release(); return }
    if (inFlight > 0 || turnScheduled) return
    turnScheduled = true
    setImmediate(() => {
      turnScheduled = false
      if (inFlight === 0 && held.length > 0) release()
    })
  }
  ctx._decodeTokens = (...args: unknown[]) => new Promise((resolve, reject) => {
    held.push({ args, resolve, reject })
    check()
  })
  return check
}

export interface OrderedContext {
  context: LlamaContext
  /** Call when a sequence of this context stops generating (`active()` dropped), so that the others are not held for it. */
  recheck (): void
}

/**
 * A context of `sequences` sequences decoding on `threads` threads, whose
 * batches are one forward pass each. `active()`: how many of its sequences are
 * generating now (leased).
 */
export async function createOrderedContext (model: LlamaModel, sequences: number, threads: number, contextSize: number, active: () => number): Promise<OrderedContext> {
  if (installed !== KNOWN_VERSION) {
    const context = await model.createContext({ sequences, threads, contextSize, flashAttention: false })
    return { context, recheck: () => undefined }
  }
  let ctx: LlamaContext | null = null
  ctx = await model.createContext({
    sequences,
    threads,
    contextSize,
    flashAttention: false,
    batching: { itemPrioritizationStrategy: ({ items, size }) => bySequence(ctx as Internals | null, items, size) },
  })
  return { context: ctx, recheck: gather(ctx as Internals, active) }
}
