// The request step of a remote model's request in the data-plane worker that
// received it ([generation] relay = "worker"). The data plane hands it every
// request its router sent to a `kind = "generate"` service; it takes the POSTs
// of /api/generate, /api/chat, /v1/completions and /v1/chat/completions with a
// body of known length (16 MiB at most, as the service reads), reads the body,
// parses it with the APIs' own parsers, and when the model's chain starts with
// a model a remote server lists (the listing the control plane pushes), asks
// the control plane once to admit it (link.ts, messages.ts) and relays the
// server's reply here (relay.ts). Everything else, and whatever the control
// plane says is not for it (a local model, a refusal the service makes
// itself: a bad body, a missing key, a prompt over the limits), goes the old
// way: the body already read is replayed to the service's socket.

import type { GenerationConf } from '../../config/generation.js'
import { Consumers } from '../budget/consumer.js'
import { overLimit, reservation } from '../dispatch/generation.js'
import { type GenRequest, isApiError } from '../dispatch/request.js'
import { OllamaWriter } from '../ollama/reply.js'
import { parseChat, parseGenerate } from '../ollama/request.js'
import { OpenAiWriter } from '../openai/reply.js'
import { parseChatCompletion, parseCompletion } from '../openai/request.js'
import { modelChain } from '../remote/chain.js'
import { type EdgeClient, type EdgeCtx, EdgeResponse } from './edge-response.js'
import type { EdgeLink } from './link.js'
import { relay, type Writer } from './relay.js'

/** The generation service's body limit (core/gen/http/routes.ts MAX_BODY): a larger body goes the old way, unread. */
const MAX_BODY = 16 << 20
const PATHS = ['/api/generate', '/api/chat', '/v1/completions', '/v1/chat/completions'] as const

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
  readonly #count: (ctx: EdgeCtx) => void

  /** `count`: counts a request once it ended (DataPlane.finish). */
  constructor (conf: GenerationConf, link: EdgeLink, count: (ctx: EdgeCtx) => void) {
    this.#conf = conf
    this.#link = link
    this.#consumers = new Consumers(conf.auth, conf.keys)
    this.#count = count
  }

  /**
   * Takes the request (true: it is answered from here on, `toService` may be called once with its body to send
   * it the old way), or false: the caller proxies it to the service as any request, nothing of it read.
   */
  take (ctx: EdgeCtx, client: EdgeClient, toService: (body: Buffer) => void): boolean {
    if (ctx.method !== 'POST' || ctx.chunked || ctx.contentLength <= 0 || ctx.contentLength > MAX_BODY || !(PATHS as readonly string[]).includes(ctx.path)) return false
    const arrived = process.hrtime.bigint()
    const res = new EdgeResponse(client, ctx, () => this.#count(ctx))
    client.onAbort(() => res.gone())
    const chunks: Buffer[] = []
    client.onBody((chunk, last) => {
      ctx.bytesIn += chunk.length
      chunks.push(Buffer.from(chunk)) // a view the transport reuses
      if (!last) return
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
      if (res.destroyed) return
      this.#decide(ctx, res, body, arrived).then((served) => {
        if (served || res.destroyed) return
        ctx.bytesIn = 0 // counted again as it is forwarded
        toService(body)
      }, (e: Error) => {
        // a bug here must not leave the client hanging
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' }).end(`internal error: ${e.message}\n`)
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
    return await relay({ link: this.#link, requestTimeoutMs: conf.requestTimeoutMs }, res, r, writer, {
      kind: 'admit', id: this.#link.nextId(), consumer: who.id, model: r.model, displayModel: r.displayModel,
      reserve: reservation(conf, r), endpoint: r.endpoint, stream: r.stream, arrived,
    })
  }
}
