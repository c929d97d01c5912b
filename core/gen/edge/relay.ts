// A remote model's reply relayed in the worker: the admission asked of the
// control plane (or made here and told: link.ts pick), then the server it names called with the service's own
// attempt (remote/run.ts relayAttempt: callServer and the caller's reply
// writer), the request's life (client gone: the upstream request aborted;
// request_timeout: 504) as the service's (RequestLife), a failure before the
// first piece reached the client asked again (retry) for the next server or
// fallback, and the end told once, before the client can see it: outcome,
// tokens, pieces and the times of the first piece and the end.

import { ERRORS, formatError } from '../../errors.js'
import type { ApiError, GenRequest } from '../dispatch/request.js'
import type { JobResult } from '../local/protocol.js'
import type { CallTarget } from '../remote/client.js'
import { relayAttempt, RequestLife, type RemoteWriter } from '../remote/run.js'
import type { GenOutcome } from '../stats.js'
import type { EdgeResponse } from './edge-response.js'
import { ANSWER_WAIT_MS, type EdgeLink, type Picked } from './link.js'
import type { EdgeAdmit, EdgeAnswer, EdgeServer } from './messages.js'

export type Writer = RemoteWriter

export interface RelayEnv {
  link: EdgeLink
  /** generation.request_timeout, ms; 0 = none */
  requestTimeoutMs: number
}

const target = (s: EdgeServer): CallTarget => ({ conf: { name: s.name, kind: s.kind, url: s.url }, headers: () => s.headers as Record<string, string> })

/** The control plane did not answer in time (link.ts ANSWER_WAIT_MS). */
const busy = (ms: number): ApiError =>
  ({ status: ERRORS.LB_ERR_GEN_RELAY_BUSY.status, message: formatError('LB_ERR_GEN_RELAY_BUSY', { ms }), code: 'LB_ERR_GEN_RELAY_BUSY', retryAfter: 1 })

/**
 * Relays request `r` (admission `admit`) to `res` through `writer`: to the server `here` when the worker admitted it
 * itself (link.ts pick), else to the one the control plane names. Returns false, nothing written, when the control
 * plane says the request goes the old way; true when it was answered here (whatever the answer).
 */
export async function relay (env: RelayEnv, res: EdgeResponse, r: GenRequest, writer: Writer, admit: EdgeAdmit, here: Picked | null): Promise<boolean> {
  const { link } = env
  const id = admit.id
  let a: EdgeAnswer | null
  if (here === null) a = await link.ask(admit)
  else {
    // told once the request went out (the attempt's synchronous part, below), and before any retry or end of it
    queueMicrotask(() => link.tell({ ...admit, kind: 'admitted', server: here.server.name, slot: here.slot, minute: here.minute, day: here.day }))
    a = { server: here.server, served: here.served }
  }
  if (a === null) {
    writer.fail(busy(ANSWER_WAIT_MS))
    return true
  }
  if ('go' in a) return res.destroyed // the old way, unless the client left meanwhile (counted then)
  if ('error' in a) {
    writer.fail(a.error)
    return true
  }
  // the end, told once: before the reply's last write (done), or when the outcome is decided otherwise
  let pieces = 0
  let first = 0n
  let told = false
  const tell = (outcome: GenOutcome, result: JobResult | null): void => {
    if (told) return
    told = true
    link.tell({
      kind: 'end', id, outcome, refund: false, pieces, first, end: process.hrtime.bigint(),
      result: result === null ? null : { promptTokens: result.promptTokens, completionTokens: result.evalTokens },
    })
  }
  const counted: Writer = {
    pieces (texts, ts) {
      pieces += texts.length
      if (first === 0n) first = process.hrtime.bigint()
      writer.pieces(texts, ts)
    },
    done (result, totalNs) { tell('ok', result); writer.done(result, totalNs) },
    loaded (reason) { tell('ok', null); writer.loaded(reason) },
    fail: (e) => writer.fail(e),
  }
  // 'ok' is told with its result by done(); every other outcome at once
  const life = new RequestLife({ requestTimeoutMs: env.requestTimeoutMs, count: (o) => { if (o !== 'ok') tell(o, null) } }, res, res.destroyed || res.writableEnded, (e) => counted.fail(e))
  res.onCut = (e) => { life.abort('error'); counted.fail(e) }
  const attempt = relayAttempt(r, res, counted)
  for (;;) {
    res.serverIs(a.server.name)
    const e = await attempt(target(a.server), a.served, life)
    if (e.ok || life.finished) return true
    if (!e.retry) {
      life.end(e.error.status >= 500 ? 'error' : 'client_error')
      counted.fail(e.error)
      return true
    }
    a = await link.ask({ kind: 'retry', id, error: e.error, down: e.down, missing: e.missing })
    if (life.finished) return true // gone or timed out meanwhile: its end was told
    if (a === null || !('server' in a)) {
      life.stop()
      if (a === null) {
        link.giveBack(id)
        counted.fail(busy(ANSWER_WAIT_MS))
      } else {
        // counted there: no server or fallback could start it
        counted.fail('error' in a ? a.error : { status: 502, message: 'no model server could serve the request' })
      }
      return true
    }
  }
}
