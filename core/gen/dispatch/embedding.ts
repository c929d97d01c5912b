// Embeddings, whichever client API asked (/api/embed, /api/embeddings,
// /v1/embeddings): the same limits, model lookup (an alias, a local model,
// else the remote servers that list it), scheduler and request life as
// generation (dispatch/generation.ts); the runner or the remote server
// computes one vector per text (local/runner/embed.ts, remote/embed-client.ts),
// this scales and cuts them as asked.

import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Consumer } from '../budget/consumer.js'
import type { JobSpec } from '../local/protocol.js'
import type { JobSink } from '../local/scheduler.js'
import { contextLength } from '../models/gguf.js'
import { embedCall } from '../remote/embed-client.js'
import { runRemote } from '../remote/run.js'
import type { GenOutcome } from '../stats.js'
import { allowed, effectiveOptions, type GenEnv, modelNotFound, numCtxOf, overPromptBytes, runJob } from './generation.js'
import { type ApiError, type EmbedRequest, isApiError } from './request.js'

/** Texts per request at most (OpenAI's limit): each is one evaluation of the model. */
export const MAX_INPUTS = 2048

export interface EmbedWriter {
  /** One vector per input, in order; `promptTokens`: tokens evaluated over all inputs. */
  done (vectors: number[][], promptTokens: number, loadNs: number, totalNs: number): void
  fail (e: ApiError): void
}

/** Scales `v` to length 1 (a zero vector stays as it is). */
function normalize (v: number[]): number[] {
  let sum = 0
  for (const x of v) sum += x * x
  const n = Math.sqrt(sum)
  return n === 0 ? v : v.map((x) => x / n)
}

export async function embedding (env: GenEnv, req: IncomingMessage, res: ServerResponse, r: EmbedRequest | ApiError, writer: EmbedWriter, who: Consumer): Promise<number> {
  const refuse = (e: ApiError): number => { writer.fail(e); return e.status }
  if (isApiError(r)) return refuse(r)
  if (r.inputs.length > MAX_INPUTS) return refuse({ status: 400, message: `at most ${MAX_INPUTS} inputs per request, found ${r.inputs.length}`, param: 'input' })
  let bytes = 0
  for (const t of r.inputs) bytes += Buffer.byteLength(t)
  const over = overPromptBytes(env.conf, bytes)
  if (over !== null) return refuse(over)
  const failWith = (status: number, message: string): void => writer.fail({ status, message })
  const finish = (vectors: number[][], promptTokens: number, loadNs: number, totalNs: number): void => {
    const dims = vectors[0]?.length ?? 0
    if (r.dimensions > dims) {
      failWith(400, `invalid value for "dimensions": model ${r.displayModel} makes vectors of ${dims} dimensions, ${r.dimensions} were asked`)
      return
    }
    if (r.dimensions > 0) vectors = vectors.map((v) => v.slice(0, r.dimensions))
    if (r.normalize) vectors = vectors.map(normalize)
    writer.done(vectors, promptTokens, loadNs, totalNs)
  }
  if (!allowed(env, who, r.model)) return refuse(modelNotFound(r.displayModel))
  const name = env.remote.resolve(r.model)
  const e = await env.catalog.lookup(name)
  if (e === null) await env.remote.ready()
  if (e === null && !env.remote.knows(name)) return refuse(modelNotFound(r.displayModel))
  if (r.inputs.length === 0) {
    writer.done([], 0, 0, 0)
    return 200
  }
  if (e === null) {
    // reserved: one token per byte of the texts (the most they can be: a token stands for at least one byte)
    let ticket = env.budget.admit(who, bytes)
    if (ticket instanceof Promise) ticket = await ticket
    if (isApiError(ticket)) return refuse(ticket)
    const m = env.budget.meterOf(who, ticket)
    // the end is counted (and the ticket released) just before the result: the result's tokens win
    const count = (o: GenOutcome): void => { env.requests.embed[o]++; m.release() }
    const out = await runRemote({ registry: env.remote, requestTimeoutMs: env.conf.requestTimeoutMs, log: env.log, count }, req, res, [name], (x) => writer.fail(x),
      (s, served, life) => embedCall(s, served, r, life.signal, (got) => {
        life.end(r.dimensions > (got.vectors[0]?.length ?? 0) ? 'client_error' : 'ok')
        m.used(got.promptTokens, 0)
        finish(got.vectors, got.promptTokens, 0, Number(process.hrtime.bigint() - life.started))
      }))
    if (out.served) return 0
    m.refund()
    return refuse(out.error ?? modelNotFound(r.displayModel))
  }
  const info = await env.catalog.info(e).catch(() => null)
  const o = effectiveOptions(e, r.numCtx === null ? {} : { numCtx: r.numCtx })
  const spec: JobSpec = {
    kind: 'embed', model: e.name, modelPath: e.path, numCtx: numCtxOf(env.conf, o.numCtx, info === null ? 0 : contextLength(info)),
    stream: false, prompt: '', system: null, raw: true, context: null, messages: null, format: null, formatOptional: false,
    sampling: { temperature: 0, topK: 0, topP: 1, minP: 0, seed: 0, repeatPenalty: 1, repeatLastN: 0, presencePenalty: 0, frequencyPenalty: 0 },
    numPredict: 0, stop: [], returnContext: false, truncate: r.truncate, inputs: r.inputs,
  }
  const started = process.hrtime.bigint()
  const sink: JobSink = {
    pieces: () => undefined,
    done: (result) => finish(result.embeddings ?? [], result.promptTokens, result.loadNs, Number(process.hrtime.bigint() - started)),
    fail: failWith,
  }
  return await runJob(env, req, res, spec, r.keepAliveMs ?? env.conf.keepAliveMs, e.size, 'embed', sink, (x) => writer.fail(x), who, bytes)
}
