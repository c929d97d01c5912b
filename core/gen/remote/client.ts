// One request to one remote model server, in the wire its kind speaks,
// relayed as it arrives: each chunk read becomes one batch of pieces for the
// caller (the same events as the local runner's), the end a JobResult. What
// the call came to is returned, not thrown, so that remote/run.ts can decide:
// a failure before the first piece reached the client may go to another
// server or a fallback; a failure after it ends the reply in the caller's shape.
// The call (http-call.ts) bounds only connecting: a long prompt on a CPU server
// may take minutes to its first token, and request_timeout bounds the request
// (remote/run.ts).

import { isoNow } from '../../clock.js'
import { formatError } from '../../errors.js'
import type { ApiError, GenRequest } from '../dispatch/request.js'
import type { JobResult } from '../local/protocol.js'
import { ollamaCall, ollamaErrorMessage, ollamaLine } from './ollama-wire.js'
import { openaiCall, openaiErrorOf, openaiEvent } from './openai-wire.js'
import { post } from './http-call.js'
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

export const upstreamError = (server: string, reason: string): ApiError =>
  ({ status: 502, message: formatError('LB_ERR_GEN_UPSTREAM', { server, reason }), code: 'LB_ERR_GEN_UPSTREAM' })

/** A reply that is not 200, from its status and (the start of) its body: what the client gets, and what it says of the server. */
export function refusal (name: string, openai: boolean, s: number, text: string): { error: ApiError, retry: boolean, down: boolean, missing: boolean } {
  const detail = openai ? openaiErrorOf(text) : { message: ollamaErrorMessage(text) }
  if (s === 404) return { error: { status: 404, message: detail.message, param: 'model', code: 'model_not_found' }, retry: true, down: false, missing: true }
  // 408, 429, 5xx: another server may do it; 5xx but 503 (a full queue) says the server is unwell
  if (s === 408 || s === 429 || s >= 500) return { error: upstreamError(name, `HTTP ${s}: ${detail.message}`), retry: true, down: s >= 500 && s !== 503, missing: false }
  // another 4xx is about the request: every server would say it, so it goes back to the client
  return { error: { status: s, message: detail.message, param: 'param' in detail ? detail.param : null, code: 'code' in detail ? detail.code : null }, retry: false, down: false, missing: false }
}

/**
 * Asks `server` for `r` (as `served`, its spelling of the model) and relays the reply to `sink` while
 * `signal` is not aborted. `stream`: the client reads pieces as they come (else the text is kept for done).
 */
export function callServer (server: CallTarget, served: string, r: GenRequest, signal: AbortSignal, sink: RemoteSink): Promise<CallEnd> {
  const name = server.conf.name
  const openai = server.conf.kind === 'openai'
  const { path, body } = openai ? openaiCall(r, served) : ollamaCall(r, served)
  const st = new ReplyState(!r.stream)
  const reader = openai ? new SseReader() : new NdjsonReader()
  let delivered = false
  const failed = (error: ApiError, retry: boolean, down: boolean, missing = false): CallEnd =>
    ({ ok: false, error, delivered, retry: retry && !delivered, down, missing })
  /** the texts read are due to the client (a flush is queued) */
  let queued = false
  /** The texts read so far go to the client, as one batch (a streamed reply's: the others are written whole at the end). */
  const flush = (): void => {
    queued = false
    if (!r.stream || st.texts.length === 0) return
    delivered = true
    // created_at of the batch, as Ollama's
    sink.pieces(st.take(), isoNow())
  }
  /**
   * Reads messages into the reply. Their texts go out once the socket read that brought them is parsed (a
   * microtask: it runs before any other I/O): a read holds many HTTP chunks, one per token from most servers, and
   * the client gets them in one write, not one each. Every end of the call flushes first.
   */
  const take = (msgs: unknown[]): void => {
    for (const m of msgs) {
      if (openai) openaiEvent(m as string, st)
      else ollamaLine(m, st)
    }
    if (r.stream && !queued && st.texts.length > 0) {
      queued = true
      queueMicrotask(flush)
    }
  }
  return new Promise((resolve) => {
    let status = 0
    /** a refusal's body, read up to MAX_ERROR_BODY */
    let errorText = ''
    let settled = false
    const settle = (e: CallEnd): void => {
      if (settled) return
      settled = true
      resolve(e)
    }
    /** the call failed: what was read before it reaches the client first (and then it cannot go elsewhere) */
    const fail = (error: ApiError, retry: boolean, down: boolean, missing = false): void => {
      if (settled) return
      flush()
      settle(failed(error, retry, down, missing))
    }
    // the client left: nothing more is written (the call is cancelled by the same signal)
    const gone = (): void => settle(failed({ status: 499, message: 'client gone' }, false, false))
    if (signal.aborted) { gone(); return }
    signal.addEventListener('abort', gone, { once: true })
    /** the reply's stream was not in its wire's format, or the server reported an error inside it */
    const broken = (e: unknown): void => {
      call.cancel()
      if (e instanceof StreamError) fail(upstreamError(name, e.message), true, false)
      else fail(upstreamError(name, `the reply broke off: ${(e as Error).message}`), true, true)
    }
    const refused = (): void => {
      const x = refusal(name, openai, status, errorText)
      fail(x.error, x.retry, x.down, x.missing)
    }
    const call = post(server.conf.url, path, server.headers(), JSON.stringify(body), signal, {
      head (s) { status = s },
      body (buf, start, end) {
        if (settled) return null
        if (status !== 200) {
          errorText += buf.toString('utf8', start, Math.min(end, start + MAX_ERROR_BODY - errorText.length))
          if (errorText.length >= MAX_ERROR_BODY) { call.cancel(); refused() }
          return null
        }
        try {
          take(reader.push(buf.subarray(start, end)))
        } catch (e) {
          broken(e)
          return null
        }
        // The end is written with the last pieces (one write, not two). A server that sent [DONE] and holds its
        // connection is not waited for.
        if (st.finished) {
          call.finish()
          flush()
          sink.done(st.result())
          settle({ ok: true })
          return null
        }
        // a slow client slows the server (TCP backpressure) instead of growing lb's buffers
        return sink.drained()
      },
      end () {
        if (settled) return
        if (status !== 200) { refused(); return }
        try {
          take(reader.end())
        } catch (e) {
          broken(e)
          return
        }
        if (!st.finished) { fail(upstreamError(name, 'the reply ended before it was complete'), true, true); return }
        flush()
        sink.done(st.result())
        settle({ ok: true })
      },
      error (reason, head) {
        if (settled) return
        // the connection broke: before the reply (the server is not there) or during it (it died mid-reply)
        fail(upstreamError(name, head ? `the reply broke off: ${reason}` : reason), true, true)
      },
    })
  })
}
