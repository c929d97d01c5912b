// /v1/embeddings: {model, input: string | string[], encoding_format, dimensions}
// -> {object: "list", data: [{object: "embedding", embedding, index}], model,
// usage}. Vectors have length 1, as OpenAI's; `encoding_format: "base64"`
// (what the official clients ask for by default) sends each as the base64 of
// its little-endian float32 values. Token arrays as input are refused: their
// ids are those of OpenAI's tokenizers.

import type { ServerResponse } from 'node:http'
import { describe } from '../../config/check.js'
import type { EmbedWriter } from '../dispatch/embedding.js'
import type { ApiError, EmbedRequest } from '../dispatch/request.js'
import { sendError, sendJson } from '../http/respond.js'
import { parseModelName } from '../models/names.js'
import { bad } from './request.js'

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)

export interface OpenAiEmbed { embed: EmbedRequest, base64: boolean }

export function parseEmbeddings (body: unknown): OpenAiEmbed | ApiError {
  if (!isObj(body)) return { status: 400, message: `invalid request: expected a JSON object, found ${describe(body)}` }
  const m = body.model
  if (m === undefined || m === null || m === '') return { status: 400, message: 'you must provide a model parameter', param: 'model' }
  if (typeof m !== 'string') return bad('model', 'a string', m)
  const model = parseModelName(m)
  if (model === null) return { status: 400, message: `invalid model name ${JSON.stringify(m)}`, param: 'model' }
  const input = body.input
  let inputs: string[]
  if (typeof input === 'string') inputs = [input]
  else if (Array.isArray(input) && input.length > 0 && input.every((x) => typeof x === 'string')) inputs = input as string[]
  else if (Array.isArray(input) && input.length > 0 && input.every((x) => typeof x === 'number' || Array.isArray(x))) {
    return { status: 400, message: '"input" as token ids is not supported: send text (the ids are those of OpenAI\'s tokenizers)', param: 'input' }
  } else return bad('input', 'a string or a non-empty array of strings', input)
  const fmt = body.encoding_format ?? 'float'
  if (fmt !== 'float' && fmt !== 'base64') return bad('encoding_format', '"float" or "base64"', fmt)
  const dimensions = body.dimensions ?? 0
  if (typeof dimensions !== 'number' || !Number.isInteger(dimensions) || dimensions < 0) return bad('dimensions', 'a positive integer', dimensions)
  return { embed: { model, displayModel: m, inputs, keepAliveMs: null, truncate: true, normalize: true, dimensions, numCtx: null }, base64: fmt === 'base64' }
}

const base64 = (v: readonly number[]): string => Buffer.from(new Float32Array(v).buffer).toString('base64')

export function openaiEmbedWriter (res: ServerResponse, r: OpenAiEmbed): EmbedWriter {
  return {
    done (vectors, promptTokens) {
      const data = vectors.map((v, index) => ({ object: 'embedding', embedding: r.base64 ? base64(v) : v, index }))
      sendJson(res, 200, JSON.stringify({ object: 'list', data, model: r.embed.displayModel, usage: { prompt_tokens: promptTokens, total_tokens: promptTokens } }))
    },
    fail (e: ApiError) { if (!res.writableEnded && !res.destroyed) sendError(res, 'openai', e) },
  }
}
