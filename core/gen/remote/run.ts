// A request's life on the remote servers: the models of its chain (the model,
// then its fallbacks) in order, and for each the servers that list it, best
// first, until one starts the reply. A failure before the first piece reached
// the client moves on (and marks a failing server down); after it, the reply
// ends with the error in the caller's shape. The client going away aborts the
// upstream request (undici closes its connection, which the server sees at
// once); request_timeout aborts it and answers 504, as for a local job.

import type { IncomingMessage, ServerResponse } from 'node:http'
import { formatError } from '../../errors.js'
import type { Logger } from '../../log.js'
import type { ApiError, GenRequest } from '../dispatch/request.js'
import type { JobResult } from '../local/protocol.js'
import type { GenOutcome } from '../stats.js'
import { callServer, type RemoteSink } from './client.js'
import type { RemoteRegistry } from './registry.js'
import type { RemoteServer } from './server.js'

/** What a remote reply is written with: the ReplyWriter of the caller's API (dispatch/generation.ts). */
export interface RemoteWriter {
  pieces (texts: readonly string[], ts: string): void
  done (r: JobResult, totalNs: number): void
  loaded (reason: 'load' | 'unload'): void
  fail (e: ApiError): void
}

export interface RemoteEnv {
  registry: RemoteRegistry
  /** generation.request_timeout, ms; 0 = none. */
  requestTimeoutMs: number
  log: Logger
  /** Counts the request's outcome once it ended here. */
  count (outcome: GenOutcome): void
}

/** The request was served (its outcome counted here), or why no server could start it (nothing was written). */
export type RemoteResult = { served: true } | { served: false, error: ApiError | null }

/**
 * Serves `r` from the first model of `names` that a server that is up can start. Returns served: false, with
 * nothing written and nothing counted, when no server lists any of them (error null) or none could start it.
 */
export async function runRemote (env: RemoteEnv, req: IncomingMessage, res: ServerResponse, r: GenRequest, names: readonly string[], writer: RemoteWriter): Promise<RemoteResult> {
  await env.registry.ready()
  if (!names.some((n) => env.registry.knows(n))) return { served: false, error: null }
  const ac = new AbortController()
  let finished = false
  let timer: NodeJS.Timeout | null = null
  const started = process.hrtime.bigint()
  const stop = (): void => {
    finished = true
    if (timer !== null) clearTimeout(timer)
    res.off('close', gone)
  }
  const end = (outcome: GenOutcome): void => {
    if (finished) return
    stop()
    env.count(outcome)
  }
  function gone (): void {
    if (finished) return
    end('cancelled')
    ac.abort()
  }
  res.on('close', gone)
  req.on('error', () => undefined)
  // The client may have left while the body was read.
  if (req.socket.destroyed) gone()
  if (env.requestTimeoutMs > 0) {
    timer = setTimeout(() => {
      if (finished) return
      end('timeout')
      ac.abort()
      writer.fail({ status: 504, message: formatError('LB_ERR_GEN_TIMEOUT', { seconds: env.requestTimeoutMs / 1000 }), code: 'LB_ERR_GEN_TIMEOUT' })
    }, env.requestTimeoutMs)
  }
  const sink: RemoteSink = {
    pieces: (texts, ts) => { if (!finished) writer.pieces(texts, ts) },
    done (result) {
      if (finished) return
      end('ok')
      if (r.loadOnly) writer.loaded(result.doneReason === 'unload' ? 'unload' : 'load')
      else writer.done(result, Number(process.hrtime.bigint() - started))
    },
  }
  let last: ApiError | null = null
  const down: string[] = []
  for (const name of names) {
    const tried = new Set<RemoteServer>()
    for (let s = env.registry.pick(name, tried); s !== null && !finished; s = env.registry.pick(name, tried)) {
      tried.add(s)
      const m = s.models.get(name)!
      s.begin(name)
      const e = await callServer(s, m.served, r, ac.signal, sink).finally(() => s.end(name))
      if (e.ok || finished) return { served: true }
      if (e.missing) s.forget(name)
      if (e.down) s.markDown(e.error.message)
      if (!e.retry) {
        end(e.error.status >= 500 ? 'error' : 'client_error')
        writer.fail(e.error)
        return { served: true }
      }
      last = e.error
      env.log.warn('model server could not serve the request; trying the next', { server: s.conf.name, model: name, reason: e.error.message })
    }
    if (finished) return { served: true }
    for (const s of env.registry.servers) if (s.models.has(name) && !s.up) down.push(`${s.conf.name}: ${s.reason}`)
  }
  stop()
  if (last !== null) return { served: false, error: last }
  const model = names[0]!
  return {
    served: false,
    error: { status: 503, message: formatError('LB_ERR_GEN_NO_SERVER', { model, reasons: down.join('; ') }), code: 'LB_ERR_GEN_NO_SERVER' },
  }
}
