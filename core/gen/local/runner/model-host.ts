// Models loaded in one worker thread, and the sequences jobs lease from them.
//
// A model is loaded once per worker (weights shared) and gets, per context
// size, a pool of up to `contexts` llama contexts with `parallel` sequences
// each. A job leases one sequence; sequences of one context are decoded
// together in one batch, different contexts decode concurrently on the native
// thread pool. New jobs go to an idle context first (spreading over cores),
// then to the least busy one (batching). Sequences are kept after use, so a
// later prompt that starts the same way reuses the evaluated prefix; a job gets
// the free sequence with the lowest id (see lowestFree).
//
// Invariant: a pool for another context size exists only while one of its
// sequences is leased; an idle one is disposed when a new size is needed, so
// clients sending many distinct num_ctx values cannot pile up contexts.

import { getLlama, LlamaLogLevel, resolveChatWrapper, type ChatWrapper, type Llama, type LlamaContext, type LlamaContextSequence, type LlamaModel } from 'node-llama-cpp'
import { createOrderedContext, type OrderedContext } from './batch-order.js'
import type { RunnerConf } from '../protocol.js'

export const llama: Llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error })

/** A sequence and its id in its context (node-llama-cpp keeps the id internal). */
interface Seq { seq: LlamaContextSequence, id: number }
/** `made`: sequences created so far; node-llama-cpp numbers them 0, 1, ... as none is ever disposed before its context. */
interface Slot { context: LlamaContext, recheck: () => void, free: Seq[], busy: number, made: number }
interface CtxPool { slots: Slot[], creating: number, waiters: Array<() => void> }

export interface Hosted {
  model: LlamaModel
  chatWrapper: ChatWrapper
  /** The GGUF carries a chat template: /api/generate (not raw) formats the prompt with it, as Ollama does. */
  hasTemplate: boolean
  /** Tokens in the vocabulary: valid ids are 0 .. vocabSize - 1 (0 = unknown). */
  vocabSize: number
  pools: Map<number, CtxPool>
}

export interface Lease { pool: CtxPool, slot: Slot, seq: LlamaContextSequence, id: number }

const hosted = new Map<string, Promise<Hosted>>()

async function load (path: string): Promise<Hosted> {
  const model = await llama.loadModel({ modelPath: path, defaultContextFlashAttention: false })
  const meta = model.fileInfo.metadata as { tokenizer?: { chat_template?: unknown, ggml?: { tokens?: readonly unknown[] } } }
  return {
    model,
    chatWrapper: resolveChatWrapper(model),
    hasTemplate: typeof meta.tokenizer?.chat_template === 'string',
    vocabSize: meta.tokenizer?.ggml?.tokens?.length ?? 0,
    pools: new Map(),
  }
}

/** The loaded model; `loadNs` is the time this call waited for loading (0 when warm). */
export async function host (path: string): Promise<{ h: Hosted, loadNs: number }> {
  let p = hosted.get(path)
  if (p === undefined) {
    p = load(path)
    hosted.set(path, p)
    p.catch(() => hosted.delete(path))
  }
  const t = process.hrtime.bigint()
  const h = await p
  return { h, loadNs: Number(process.hrtime.bigint() - t) }
}

export async function unload (path: string): Promise<void> {
  const p = hosted.get(path)
  if (p === undefined) return
  // Removed first: a job arriving while this disposes loads a fresh copy.
  hosted.delete(path)
  const h = await p.catch(() => null)
  if (h === null) return
  for (const pool of h.pools.values()) for (const s of pool.slots) await s.context.dispose()
  await h.model.dispose()
}

async function disposeIdlePools (h: Hosted, keep: number): Promise<void> {
  for (const [n, pool] of h.pools) {
    if (n === keep || pool.creating > 0 || pool.slots.some((s) => s.busy > 0)) continue
    h.pools.delete(n)
    for (const s of pool.slots) await s.context.dispose()
  }
}

export async function acquire (h: Hosted, numCtx: number, conf: RunnerConf): Promise<Lease> {
  let pool = h.pools.get(numCtx)
  if (pool === undefined) {
    pool = { slots: [], creating: 0, waiters: [] }
    h.pools.set(numCtx, pool)
    await disposeIdlePools(h, numCtx)
  }
  for (;;) {
    let best: Slot | null = null
    for (const s of pool.slots) if (best === null || s.busy < best.busy) best = s
    if ((best === null || best.busy > 0) && pool.slots.length + pool.creating < conf.contexts) {
      pool.creating++
      let made: OrderedContext
      let slot: Slot | null = null
      try {
        made = await createOrderedContext(h.model, conf.parallel, conf.threads, numCtx, () => slot?.busy ?? 0)
      } finally {
        pool.creating--
      }
      slot = { context: made.context, recheck: made.recheck, free: [], busy: 0, made: 0 }
      best = slot
      pool.slots.push(slot)
    }
    if (best !== null && best.busy < conf.parallel) {
      best.busy++
      return { pool, slot: best, ...lowestFree(best) }
    }
    // Every sequence is leased (the API process normally prevents this): wait for a release.
    await new Promise<void>((resolve) => pool.waiters.push(resolve))
  }
}

/** The kept sequence with the lowest id, else a new one: busy ids stay consecutive, so a batch is one forward pass (batch-order.ts). */
function lowestFree (slot: Slot): Seq {
  if (slot.free.length === 0) return { seq: slot.context.getSequence(), id: slot.made++ }
  let i = 0
  for (let k = 1; k < slot.free.length; k++) if (slot.free[k]!.id < slot.free[i]!.id) i = k
  return slot.free.splice(i, 1)[0]!
}

export function release (lease: Lease): void {
  lease.slot.busy--
  lease.slot.free.push({ seq: lease.seq, id: lease.id })
  lease.slot.recheck()
  lease.pool.waiters.shift()?.()
}
