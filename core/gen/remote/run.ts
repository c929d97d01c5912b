// A request's life on the remote servers: the models of its chain (the model,
// then its fallbacks) in order, and for each the servers that list it, best
// first, until one starts the reply. A failure before the first piece reached
// the client moves on (and marks a failing server down); after it, the reply
// ends with the error in the caller's shape. The client going away aborts the
// upstream request (its connection is closed, which the server sees at
// once); request_timeout aborts it and answers 504, as for a local job.

import { once } from 'node:events'
import type { IncomingMessage } from 'node:http'
import { formatError } from '../../errors.js'
import type { Logger } from '../../log.js'
import type { ApiError, GenRequest } from '../dispatch/request.js'
import type { JobResult } from '../local/protocol.js'
import type { GenResponse } from '../http/gen-response.js'
import type { GenOutcome } from '../stats.js'
import { type CallEnd, callServer, type CallTarget, type RemoteSink } from './client.js'
import type { RemoteRegistry } from './registry.js'
import type { RemoteServer } from './server.js'

export interface RemoteEnv {
  registry: RemoteRegistry
  /** generation.request_timeout, ms; 0 = none. */
  requestTimeoutMs: number
  log: Logger
  /** Counts the request's outcome once it ended here. */
  count (outcome: GenOutcome): void
  /** `server` is asked for `model` (the request's usage moves there: dispatch/model-usage.ts). */
  attempt? (server: string, model: string): void
}

/** The request was served (its outcome counted here), or why no server could start it (nothing was written). */
export type RemoteResult = { served: true } | { served: false, error: ApiError | null }

/** What a request's life needs of its surroundings (a data-plane worker's relay has no registry). */
export type LifeEnv = Pick<RemoteEnv, 'requestTimeoutMs' | 'count'>

/** One request's life while remote servers serve it: its abort signal, its end counted once. */
export class RequestLife {
  private readonly ac = new AbortController()
  private readonly env: LifeEnv
  private readonly res: GenResponse
  private timer: NodeJS.Timeout | null = null
  finished = false
  readonly started = process.hrtime.bigint()

  /** `left`: the client has already gone (while its body was read). */
  constructor (env: LifeEnv, res: GenResponse, left: boolean, fail: (e: ApiError) => void) {
    this.env = env
    this.res = res
    res.on('close', this.gone)
    if (left) this.gone()
    if (env.requestTimeoutMs > 0) {
      this.timer = setTimeout(() => {
        if (this.finished) return
        this.end('timeout')
        this.ac.abort()
        fail({ status: 504, message: formatError('LB_ERR_GEN_TIMEOUT', { seconds: env.requestTimeoutMs / 1000 }), code: 'LB_ERR_GEN_TIMEOUT' })
      }, env.requestTimeoutMs)
    }
  }

  get signal (): AbortSignal { return this.ac.signal }

  /** The request ended with `outcome` (counted once); later events of it are dropped. */
  end (outcome: GenOutcome): void {
    if (this.finished) return
    this.stop()
    this.env.count(outcome)
  }

  /** Ends the request with `outcome` and aborts its model server's request (lb is stopping: edge.ts cutRelays). */
  abort (outcome: GenOutcome): void {
    if (this.finished) return
    this.end(outcome)
    this.ac.abort()
  }

  /** Nothing more happens here, nothing counted: the caller answers. */
  stop (): void {
    this.finished = true
    if (this.timer !== null) clearTimeout(this.timer)
    this.res.off('close', this.gone)
  }

  private readonly gone = (): void => {
    if (this.finished) return
    this.end('cancelled')
    this.ac.abort()
  }
}

/** One attempt at a server: done (it counted the end with life.end) or why not. */
export type Attempt = (server: RemoteServer, served: string, life: RequestLife) => Promise<CallEnd>

/**
 * Serves a request from the first model of `names` that a server that is up can start (`attempt` asks one).
 * Returns served: false, with nothing written and nothing counted, when no server lists any of them (error
 * null) or none could start it; `fail` writes a failure that ends the request here.
 */
export async function runRemote (env: RemoteEnv, req: IncomingMessage, res: GenResponse, names: readonly string[],
  fail: (e: ApiError) => void, attempt: Attempt): Promise<RemoteResult> {
  await env.registry.ready()
  if (!names.some((n) => env.registry.knows(n))) return { served: false, error: null }
  req.on('error', () => undefined)
  // the client may have left while the body was read
  const life = new RequestLife(env, res, req.socket.destroyed, fail)
  let last: ApiError | null = null
  const down: string[] = []
  for (const name of names) {
    const tried = new Set<RemoteServer>()
    for (let s = env.registry.pick(name, tried); s !== null && !life.finished; s = env.registry.pick(name, tried)) {
      tried.add(s)
      const m = s.models.get(name)!
      s.begin(name)
      env.attempt?.(s.conf.name, name)
      const e = await attempt(s, m.served, life).finally(() => s.end(name))
      if (e.ok || life.finished) return { served: true }
      if (e.missing) s.forget(name)
      if (e.down) s.markDown(e.error.message)
      if (!e.retry) {
        life.end(e.error.status >= 500 ? 'error' : 'client_error')
        fail(e.error)
        return { served: true }
      }
      last = e.error
      env.log.warn('model server could not serve the request; trying the next', { server: s.conf.name, model: name, reason: e.error.message })
    }
    if (life.finished) return { served: true }
    for (const s of env.registry.servers) if (s.models.has(name) && !s.up) down.push(`${s.conf.name}: ${s.reason}`)
  }
  life.stop()
  if (last !== null) return { served: false, error: last }
  return {
    served: false,
    error: { status: 503, message: formatError('LB_ERR_GEN_NO_SERVER', { model: names[0]!, reasons: down.join('; ') }), code: 'LB_ERR_GEN_NO_SERVER' },
  }
}

/** What a remote reply is written with: the ReplyWriter of the caller's API (dispatch/generation.ts). */
export interface RemoteWriter {
  pieces (texts: readonly string[], ts: string): void
  done (r: JobResult, totalNs: number): void
  loaded (reason: 'load' | 'unload'): void
  fail (e: ApiError): void
}

/** A text request (generate, chat, either API) on the remote servers, its reply written by `writer`. */
export function generateRemote (env: RemoteEnv, req: IncomingMessage, res: GenResponse, r: GenRequest, names: readonly string[], writer: RemoteWriter): Promise<RemoteResult> {
  return runRemote(env, req, res, names, (e) => writer.fail(e), relayAttempt(r, res, writer))
}

/**
 * One attempt of a text request at a server, its reply relayed to `writer` on `res` (here, or in a data-plane
 * worker: core/gen/edge/): what runRemote and the worker's relay both run per server.
 */
export function relayAttempt (r: GenRequest, res: GenResponse, writer: RemoteWriter): (s: CallTarget, served: string, life: RequestLife) => Promise<CallEnd> {
  return (s, served, life) => {
    // Ollama's empty prompt loads the model; OpenAI's API cannot say it, and such a server serves what it has loaded
    if (r.loadOnly && s.conf.kind === 'openai') {
      life.end('ok')
      writer.loaded('load')
      return Promise.resolve({ ok: true })
    }
    const sink: RemoteSink = {
      pieces: (texts, ts) => { if (!life.finished) writer.pieces(texts, ts) },
      drained: () => res.writableNeedDrain && !life.finished ? once(res, 'drain', { signal: life.signal }) : null,
      done (result) {
        if (life.finished) return
        life.end('ok')
        if (r.loadOnly) writer.loaded(result.doneReason === 'unload' ? 'unload' : 'load')
        else writer.done(result, Number(process.hrtime.bigint() - life.started))
      },
    }
    return callServer(s, served, r, life.signal, sink)
  }
}
