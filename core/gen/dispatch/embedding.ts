// Embeddings, whichever client API asked (/api/embed, /api/embeddings,
// /v1/embeddings): the same limits, model lookup, scheduler and request life
// as generation (dispatch/generation.ts); the runner computes one vector per
// text (local/runner/embed.ts), this scales and cuts them as asked.

import type { IncomingMessage, ServerResponse } from 'node:http'
import type { JobSpec } from '../local/protocol.js'
import type { JobSink } from '../local/scheduler.js'
import { contextLength } from '../models/gguf.js'
import { effectiveOptions, type GenEnv, modelNotFound, numCtxOf, overPromptBytes, runJob } from './generation.js'
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

export async function embedding (env: GenEnv, req: IncomingMessage, res: ServerResponse, r: EmbedRequest | ApiError, writer: EmbedWriter): Promise<number> {
  const refuse = (e: ApiError): number => { writer.fail(e); return e.status }
  if (isApiError(r)) return refuse(r)
  if (r.inputs.length > MAX_INPUTS) return refuse({ status: 400, message: `at most ${MAX_INPUTS} inputs per request, found ${r.inputs.length}`, param: 'input' })
  let bytes = 0
  for (const t of r.inputs) bytes += Buffer.byteLength(t)
  const over = overPromptBytes(env.conf, bytes)
  if (over !== null) return refuse(over)
  const e = await env.catalog.lookup(env.remote.resolve(r.model))
  if (e === null) return refuse(modelNotFound(r.displayModel))
  if (r.inputs.length === 0) {
    writer.done([], 0, 0, 0)
    return 200
  }
  const info = await env.catalog.info(e).catch(() => null)
  const o = effectiveOptions(e, r.numCtx === null ? {} : { numCtx: r.numCtx })
  const spec: JobSpec = {
    kind: 'embed', model: r.model, modelPath: e.path, numCtx: numCtxOf(env.conf, o.numCtx, info === null ? 0 : contextLength(info)),
    stream: false, prompt: '', system: null, raw: true, context: null, messages: null, format: null, formatOptional: false,
    sampling: { temperature: 0, topK: 0, topP: 1, minP: 0, seed: 0, repeatPenalty: 1, repeatLastN: 0, presencePenalty: 0, frequencyPenalty: 0 },
    numPredict: 0, stop: [], returnContext: false, truncate: r.truncate, inputs: r.inputs,
  }
  const started = process.hrtime.bigint()
  const failWith = (status: number, message: string): void => writer.fail({ status, message })
  const sink: JobSink = {
    pieces: () => undefined,
    done (result) {
      let vectors = result.embeddings ?? []
      const dims = vectors[0]?.length ?? 0
      if (r.dimensions > dims) {
        failWith(400, `invalid value for "dimensions": model ${r.displayModel} makes vectors of ${dims} dimensions, ${r.dimensions} were asked`)
        return
      }
      if (r.dimensions > 0) vectors = vectors.map((v) => v.slice(0, r.dimensions))
      if (r.normalize) vectors = vectors.map(normalize)
      writer.done(vectors, result.promptTokens, result.loadNs, Number(process.hrtime.bigint() - started))
    },
    fail: failWith,
  }
  return runJob(env, req, res, spec, r.keepAliveMs ?? env.conf.keepAliveMs, e.size, 'embed', sink, (x) => writer.fail(x))
}
