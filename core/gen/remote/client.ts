// One request to one remote model server, in the wire its kind speaks,
// relayed as it arrives: each chunk read becomes one batch of pieces for the
// caller (the same events as the local runner's), the end a JobResult. What
// the call came to is returned, not thrown, so that remote/run.ts can decide:
// a failure before the first piece reached the client may go to another
// server or a fallback; a failure after it ends the reply in the caller's shape.
// undici's own time-outs are off (a long prompt on a CPU server may take
// minutes to its first token): request_timeout bounds the request (remote/run.ts).
// The reply is read through undici's handler callbacks (dispatch), not a
// Readable and its async iterator: every token of a paced stream is its own
// read, and the stream layers were a fifth of the relay's CPU per token.

import { type Dispatcher, getGlobalDispatcher } from 'undici'
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

/** The call's end for a reply other than 200, from its status and (the start of) its body. */
function refusal (server: string, openai: boolean, s: number, text: string): CallEnd {
  const detail = openai ? openaiErrorOf(text) : { message: ollamaErrorMessage(text) }
  const failed = (error: ApiError, retry: boolean, down: boolean, missing = false): CallEnd =>
    ({ ok: false, error, delivered: false, retry, down, missing })
  if (s === 404) return failed({ status: 404, message: detail.message, param: 'model', code: 'model_not_found' }, true, false, true)
  // 408, 429, 5xx: another server may do it; 5xx but 503 (a full queue) says the server is unwell
  if (s === 408 || s === 429 || s >= 500) return failed(upstreamError(server, `HTTP ${s}: ${detail.message}`), true, s >= 500 && s !== 503)
  // another 4xx is about the request: every server would say it, so it goes back to the client
  return failed({ status: s, message: detail.message, param: 'param' in detail ? detail.param : null, code: 'code' in detail ? detail.code : null }, false, false)
}

/** Said to undici when lb ends a call itself (the reply is complete, the client is gone, it broke). */
const ENDED = new Error('the call ended here')

/**
 * Asks `server` for `r` (as `served`, its spelling of the model) and relays the reply to `sink` while
 * `signal` is not aborted. `stream`: the client reads pieces as they come (else the text is kept for done).
 */
export function callServer (server: CallTarget, served: string, r: GenRequest, signal: AbortSignal, sink: RemoteSink): Promise<CallEnd> {
  const name = server.conf.name
  const openai = server.conf.kind === 'openai'
  const { path, body } = openai ? openaiCall(r, served) : ollamaCall(r, served)
  const url = new URL(server.conf.url + path)
  const st = new ReplyState(!r.stream)
  const reader = openai ? new SseReader() : new NdjsonReader()
  let delivered = false
  const failed = (error: ApiError, retry: boolean, down: boolean): CallEnd =>
    ({ ok: false, error, delivered, retry: retry && !delivered, down, missing: false })
  const gone = (): CallEnd => failed({ status: 499, message: 'client gone' }, false, false)
  if (signal.aborted) return Promise.resolve(gone())
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
  /** A failure while the reply was read: the wire's own error, or the stream broke (the server died, bad framing). */
  const broke = (e: unknown): CallEnd => e instanceof StreamError
    ? failed(upstreamError(name, e.message), true, false)
    : failed(upstreamError(name, `the reply broke off: ${(e as Error).message}`), true, true)

  return new Promise((resolve) => {
    let ctl: Dispatcher.DispatchController | null = null
    let settled = false
    /** undici ended the response (its last byte read): the connection goes back to the pool */
    let ended = false
    let status = 0
    let errorBody: Buffer[] | null = null
    let errorBytes = 0
    const settle = (e: CallEnd): void => {
      if (settled) return
      settled = true
      signal.removeEventListener('abort', onAbort)
      resolve(e)
    }
    const stop = (): void => { if (ctl !== null && !ended && !ctl.aborted) ctl.abort(ENDED) }
    const onAbort = (): void => { settle(gone()); stop() }
    signal.addEventListener('abort', onAbort)
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart (c) {
        ctl = c
        if (settled) c.abort(ENDED) // the client left before the request was sent
      },
      onResponseStart (_c, code) {
        status = code
        if (code !== 200) errorBody = []
      },
      onResponseData (c, chunk) {
        if (settled) return
        if (errorBody !== null) {
          errorBody.push(chunk)
          errorBytes += chunk.length
          if (errorBytes >= MAX_ERROR_BODY) { settle(refusal(name, openai, status, Buffer.concat(errorBody).toString('utf8'))); stop() }
          return
        }
        try {
          take(reader.push(chunk))
        } catch (e) {
          settle(broke(e))
          stop()
          return
        }
        if (st.finished) {
          // The end is written with the last pieces (one write, not two). A server that sent [DONE] and holds its
          // reply is not waited for: its connection is closed unless the reply's end came in this same read.
          sink.done(st.result())
          settle({ ok: true })
          setImmediate(stop)
          return
        }
        // a slow client slows the server (TCP backpressure) instead of growing lb's buffers
        const d = sink.drained()
        if (d !== null) {
          c.pause()
          d.then(() => c.resume(), () => undefined)
        }
      },
      onResponseEnd () {
        ended = true
        if (settled) return
        if (errorBody !== null) return settle(refusal(name, openai, status, Buffer.concat(errorBody).toString('utf8')))
        try {
          take(reader.end())
        } catch (e) {
          return settle(broke(e))
        }
        if (!st.finished) return settle(failed(upstreamError(name, 'the reply ended before it was complete'), true, true))
        sink.done(st.result())
        settle({ ok: true })
      },
      onResponseError (_c, e) {
        ended = true
        if (settled) return
        if (signal.aborted) return settle(gone())
        if (errorBody !== null) return settle(refusal(name, openai, status, Buffer.concat(errorBody).toString('utf8')))
        // before the head: the server could not be reached or hung up
        settle(status === 0 ? failed(upstreamError(name, e.message), true, true) : broke(e))
      },
    }
    getGlobalDispatcher().dispatch({
      origin: url.origin, path: url.pathname + url.search, method: 'POST', headers: server.headers(), body: JSON.stringify(body), headersTimeout: 0, bodyTimeout: 0,
    }, handler)
  })
}
