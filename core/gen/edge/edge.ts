// The request step of a remote model's request in the data-plane worker that
// received it ([generation] relay = "worker"). The data plane hands it every
// request its router sent to a `kind = "generate"` service; it takes the POSTs
// of /api/generate, /api/chat, /v1/completions and /v1/chat/completions with a
// body of known length (1 MiB at most: MAX_BODY), reads the body,
// parses it with the APIs' own parsers, and when the model's chain starts with
// a model a remote server lists (the listing the control plane pushes), admits
// it itself on its consumer's budget in shared memory (core/gen/budget/ledger.ts)
// or, when it cannot decide alone, asks the control plane once (link.ts,
// messages.ts), and relays the server's reply here (relay.ts). Everything
// else, and whatever the control plane says is not for it (a local model, a
// refusal the service makes itself: a bad body, a missing key, a prompt over
// the limits), goes the old way: the body already read is replayed to the
// service's socket.

import { apiOfPath } from '../../api-errors.js'
import type { GenerationConf } from '../../config/generation.js'
import { ERRORS, formatError } from '../../errors.js'
import { type Consumer, Consumers, mayUse } from '../budget/consumer.js'
import { Ledger } from '../budget/ledger.js'
import { overLimit, reservation } from '../dispatch/generation.js'
import { type ApiError, type GenRequest, isApiError } from '../dispatch/request.js'
import { sendError } from '../http/respond.js'
import { OllamaWriter } from '../ollama/reply.js'
import { parseChat, parseGenerate } from '../ollama/request.js'
import { OpenAiWriter } from '../openai/reply.js'
import { parseChatCompletion, parseCompletion } from '../openai/request.js'
import { modelChain } from '../remote/chain.js'
import { type EdgeClient, type EdgeCtx, EdgeResponse } from './edge-response.js'
import type { EdgeLink, Picked } from './link.js'
import { relay, type Writer } from './relay.js'

/**
 * The largest body parsed in the worker, bytes: a larger one goes the old way, unread (the service takes up to
 * 16 MiB). JSON.parse holds the thread, and every other client of this worker waits: 1 MiB is a few ms of it,
 * 16 MiB about a hundred; a prompt that long has no first token to hurry anyway.
 */
const MAX_BODY = 1 << 20
const PATHS = ['/api/generate', '/api/chat', '/v1/completions', '/v1/chat/completions'] as const

/** This thread's relayed requests not yet answered, each by its cut: lb is stopping (cutRelays). */
const live = new Set<() => void>()

/**
 * At the drain deadline: every relayed request still open ends with LB_ERR_SHUTDOWN in its caller's shape (an
 * error body, or the stream's error event or line when it had begun) and its model server's request is aborted,
 * as the proxy's cutExchanges does for the others. Returns how many there were.
 */
export function cutRelays (): number {
  const n = live.size
  for (const cut of [...live]) cut()
  return n
}

const shutdown = (): ApiError => ({ status: ERRORS.LB_ERR_SHUTDOWN.status, message: formatError('LB_ERR_SHUTDOWN', {}), code: 'LB_ERR_SHUTDOWN' })
/** The request and its reply writer, or null: not one for the relay (the service answers it). */
function parse (path: string, res: EdgeResponse, body: unknown): { r: GenRequest, writer: Writer } | null {
  switch (path) {
    case '/api/generate':
    case '/api/chat': {
      const chat = path === '/api/chat'
      const r = chat ? parseChat(body) : parseGenerate(body)
      return isApiError(r) ? null : { r, writer: new OllamaWriter(res, chat, r.stream, r.displayModel) }
    }
    default: {
      const chat = path === '/v1/chat/completions'
      const o = chat ? parseChatCompletion(body) : parseCompletion(body)
      return isApiError(o) ? null : { r: o.gen, writer: new OpenAiWriter(res, chat, o) }
    }
  }
}

/**
 * The Authorization header the service would get (core/worker/proxy/forward-head.ts): a middleware may drop the
 * client's or add its own. The consumer is identified from what the service would see, as it identifies it.
 */
function forwardedAuthorization (ctx: EdgeCtx): string {
  // the client's comes first in the forwarded head, and node:http keeps the first Authorization of a request
  const own = ctx.dropHeaders !== null && ctx.dropHeaders.includes('authorization') ? '' : ctx.header('authorization')
  if (own !== '') return own
  const extra = ctx.upstreamHeaders
  if (extra !== null) for (let i = 0; i < extra.length; i += 2) if (extra[i]!.toLowerCase() === 'authorization') return extra[i + 1]!
  return ''
}

/** One data plane generation's relay of remote model requests. */
export class Edge {
  readonly #conf: GenerationConf
  readonly #link: EdgeLink
  readonly #consumers: Consumers
  /** the consumers' budgets in shared memory, as the control plane's (null: the control plane admits every request) */
  readonly #ledger: Ledger | null
  readonly #count: (ctx: EdgeCtx) => void

  /** `count`: counts a request once it ended (DataPlane.finish). */
  constructor (conf: GenerationConf, link: EdgeLink, count: (ctx: EdgeCtx) => void) {
    this.#conf = conf
    this.#link = link
    this.#consumers = new Consumers(conf.auth, conf.keys)
    const keyed = this.#consumers.labels()
    const records = link.records
    this.#ledger = records !== null && records.keyed === keyed.length ? new Ledger(keyed, Date.now, records) : null
    this.#count = count
  }

  /**
   * Takes the request (true: it is answered from here on, `toService` may be called once with its body to send
   * it the old way), or false: the caller proxies it to the service as any request, nothing of it read.
   */
  take (ctx: EdgeCtx, client: EdgeClient, toService: (body: Buffer) => void): boolean {
    if (ctx.method !== 'POST' || ctx.chunked || ctx.contentLength <= 0 || ctx.contentLength > MAX_BODY || !(PATHS as readonly string[]).includes(ctx.path)) return false
    const arrived = process.hrtime.bigint()
    const api = apiOfPath(ctx.path)
    const cut = (): void => {
      if (res.writableEnded || res.destroyed) return
      if (res.onCut !== null) res.onCut(shutdown())
      else if (!res.headersSent) sendError(res, api, shutdown())
      else res.destroy()
    }
    live.add(cut)
    const res = new EdgeResponse(client, ctx, () => { live.delete(cut); this.#count(ctx) })
    client.onAbort(() => res.gone())
    const chunks: Buffer[] = []
    client.onBody((chunk, last) => {
      ctx.bytesIn += chunk.length
      chunks.push(Buffer.from(chunk)) // a view the transport reuses
      if (!last) return
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
      if (res.destroyed) return
      this.#decide(ctx, res, body, arrived).then((served) => {
        // answered meanwhile (cut) or the client gone: nothing goes to the service
        if (served || res.writableEnded || res.destroyed) return
        ctx.bytesIn = 0 // counted again as it is forwarded
        toService(body)
      }, (e: Error) => {
        // a bug here must not leave the client hanging
        if (!res.headersSent) sendError(res, api, { status: 500, message: `internal error: ${e.message}` })
        else res.destroy()
      })
    })
    return true
  }

  /** Serves the request here (true), or says it goes the old way (false, nothing written). */
  async #decide (ctx: EdgeCtx, res: EdgeResponse, body: Buffer, arrived: bigint): Promise<boolean> {
    let value: unknown
    try { value = JSON.parse(body.toString('utf8')) } catch { return false }
    const p = parse(ctx.path, res, value)
    if (p === null) return false
    const { r, writer } = p
    const conf = this.#conf
    // the service's own refusals and the models it serves itself are its to answer
    if (r.loadOnly || r.model === '' || overLimit(conf, r) !== null) return false
    const chain = modelChain(conf.aliases, conf.fallbacks, r.model)
    if (!this.#link.knows(chain[0]!)) return false
    const who = this.#consumers.identifyBy(forwardedAuthorization(ctx), ctx.user, ctx.remoteAddress)
    if (isApiError(who)) return false
    const reserve = reservation(conf, r)
    const here = mayUse(who, r.model) ? this.#admitHere(who, chain, reserve) : null
    return await relay({ link: this.#link, requestTimeoutMs: conf.requestTimeoutMs }, res, r, writer, {
      kind: 'admit', id: this.#link.nextId(), consumer: who.id, model: r.model, displayModel: r.displayModel,
      reserve, endpoint: r.endpoint, stream: r.stream, arrived,
    }, here)
  }

  /**
   * Admits the request here, on its consumer's budget in shared memory, and picks its server (link.ts pick), or
   * null: the control plane is asked. It decides every refusal (counted there, and a cluster node's wait for a
   * lease round) and every request whose server only it can pick.
   */
  #admitHere (who: Consumer, chain: readonly string[], reserve: number): Picked | null {
    const ledger = this.#ledger
    if (ledger === null || !this.#link.canPick(chain)) return null
    const t = ledger.admit(who.id, who.limits, reserve, ledger.leased)
    if ('status' in t) return null
    const p = this.#link.pick(chain, t.minute, t.day)
    if (p === null) t.refund() // every server down meanwhile: no trace of it in the budget
    return p
  }
}
