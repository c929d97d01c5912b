// One request to one remote model server, in the wire its kind speaks,
// relayed as it arrives: each chunk read becomes one batch of pieces for the
// caller (the same events as the local runner's), the end a JobResult. What
// the call came to is returned, not thrown, so that remote/run.ts can decide:
// a failure before the first piece reached the client may go to another
// server or a fallback; a failure after it ends the reply in the caller's shape.
// undici's own time-outs are off (a long prompt on a CPU server may take
// minutes to its first token): request_timeout bounds the request (remote/run.ts).

import { request } from 'undici'
import { formatError } from '../../errors.js'
import type { ApiError, GenRequest } from '../dispatch/request.js'
import type { JobResult } from '../local/protocol.js'
import { ollamaCall, ollamaErrorMessage, ollamaLine } from './ollama-wire.js'
import { openaiCall, openaiErrorOf, openaiEvent } from './openai-wire.js'
import { ReplyState, StreamError } from './reply-state.js'
import type { RemoteKind } from '../../config/generation.js'
import { NdjsonReader, SseReader } from './stream-parse.js'

/**
 * The server a call goes to: a RemoteServer in the control plane, or what the control plane told a data-plane
 * worker of it (core/gen/edge/). `headers`: those of every request to it (its key, when it has one).
 */
export interface CallTarget {
  readonly conf: { readonly name: string, readonly kind: RemoteKind, readonly url: string }
  headers (): Record<string, string>
}

/** Where a remote reply goes: the same events as a local job's. */
export interface RemoteSink {
  pieces (texts: readonly string[], ts: string): void
  done (r: JobResult): void
  /** Resolves when the client has taken what was written (null: it has); reading waits for it meanwhile. */
  drained (): Promise<unknown> | null
}

export type CallEnd =
  | { ok: true }
  | {
    ok: false
    error: ApiError
    /** Pieces reached the client: the reply can only end with this error. */
    delivered: boolean
    /** Another server (or a fallback) may serve the request. */
    retry: boolean
    /** The server is unwell: mark it down. */
    down: boolean
    /** The server does not have the model (404): forget it there until a refresh. */
    missing: boolean
  }

/** Bytes of an error body read at most. */
const MAX_ERROR_BODY = 64 << 10

const upstreamError = (server: string, reason: string): ApiError =>
  ({ status: 502, message: formatError('LB_ERR_GEN_UPSTREAM', { server, reason }), code: 'LB_ERR_GEN_UPSTREAM' })

async function readText (body: AsyncIterable<Buffer> & { destroy: () => void }): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const c of body) {
    chunks.push(c)
    size += c.length
    if (size >= MAX_ERROR_BODY) { body.destroy(); break }
  }
  return Buffer.concat(chunks).toString('utf8')
}

/**
 * Asks `server` for `r` (as `served`, its spelling of the model) and relays the reply to `sink` while
 * `signal` is not aborted. `stream`: the client reads pieces as they come (else the text is kept for done).
 */
export async function callServer (server: CallTarget, served: string, r: GenRequest, signal: AbortSignal, sink: RemoteSink): Promise<CallEnd> {
  const name = server.conf.name
  const openai = server.conf.kind === 'openai'
  const { path, body } = openai ? openaiCall(r, served) : ollamaCall(r, served)
  const st = new ReplyState(!r.stream)
  let delivered = false
  const failed = (error: ApiError, retry: boolean, down: boolean, missing = false): CallEnd =>
    ({ ok: false, error, delivered, retry: retry && !delivered, down, missing })
  let res: Awaited<ReturnType<typeof request>>
  try {
    res = await request(server.conf.url + path, { method: 'POST', headers: server.headers(), body: JSON.stringify(body), signal, headersTimeout: 0, bodyTimeout: 0 })
  } catch (e) {
    if (signal.aborted) return failed({ status: 499, message: 'client gone' }, false, false)
    return failed(upstreamError(name, (e as Error).message), true, true)
  }
  if (res.statusCode !== 200) {
    const text = await readText(res.body as never).catch(() => '')
    const s = res.statusCode
    const detail = openai ? openaiErrorOf(text) : { message: ollamaErrorMessage(text) }
    if (s === 404) return failed({ status: 404, message: detail.message, param: 'model', code: 'model_not_found' }, true, false, true)
    // 408, 429, 5xx: another server may do it; 5xx but 503 (a full queue) says the server is unwell
    if (s === 408 || s === 429 || s >= 500) return failed(upstreamError(name, `HTTP ${s}: ${detail.message}`), true, s >= 500 && s !== 503)
    // another 4xx is about the request: every server would say it, so it goes back to the client
    return failed({ status: s, message: detail.message, param: 'param' in detail ? detail.param : null, code: 'code' in detail ? detail.code : null }, false, false)
  }
  const reader = openai ? new SseReader() : new NdjsonReader()
  const take = (msgs: unknown[]): void => {
    for (const m of msgs) {
      if (openai) openaiEvent(m as string, st)
      else ollamaLine(m, st)
    }
    if (r.stream && st.texts.length > 0) {
      delivered = true
      // created_at of the batch, as Ollama's (ollama/reply.ts nowIso; not imported: reply.ts depends on dispatch/)
      sink.pieces(st.take(), new Date().toISOString())
    }
  }
  let ended = false
  try {
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      take(reader.push(chunk))
      // The end is written with the last pieces (one write, not two). Leaving the loop closes the upstream reply
      // only when the server has not ended it yet: one that sent [DONE] and holds its connection is not waited for.
      if (st.finished) {
        ended = true
        sink.done(st.result())
        break
      }
      // a slow client slows the server (TCP backpressure) instead of growing lb's buffers
      const d = sink.drained()
      if (d !== null) await d
    }
    if (!st.finished) take(reader.end())
  } catch (e) {
    if (ended) return { ok: true }
    if (signal.aborted) return failed({ status: 499, message: 'client gone' }, false, false)
    if (e instanceof StreamError) return failed(upstreamError(name, e.message), true, false)
    // the connection broke (the server died mid-reply) or the stream was not in the wire's format
    return failed(upstreamError(name, `the reply broke off: ${(e as Error).message}`), true, true)
  }
  if (!st.finished) return failed(upstreamError(name, 'the reply ended before it was complete'), true, true)
  if (!ended) sink.done(st.result())
  return { ok: true }
}
