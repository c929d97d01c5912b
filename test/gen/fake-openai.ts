// A small OpenAI-shaped model server for the remote tests, written with
// node:http so that its replies can be chosen, misbehaviour included: a
// normal stream with usage, an error status, a socket destroyed mid-stream,
// an error event mid-stream (both after a first chunk, when the test says),
// a stream that stops after its first chunk and waits (to see lb close it);
// embeddings are [3, 4] (length 5, to see them normalised). It records every request body it is sent.

import { EventEmitter } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { createServer as createTlsServer } from 'node:https'
import { readFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import assert from 'node:assert/strict'
import { once } from 'node:events'
import type { TestContext } from 'node:test'
import { waitFor } from '../helpers.js'

export type Mode = 'ok' | 'no-usage' | 'fail500' | 'fail400' | 'die' | 'error-event' | 'hang' | 'flood' | 'done-hold' | 'drop-kept'

export interface FakeOpenAi {
  url: string
  /** Bodies of the generation requests, in order. */
  bodies: any[]
  /** The Authorization header of every request ('' when none), listings included. */
  auth: string[]
  /** The reply of the next requests. */
  mode: Mode
  /** The words streamed, one chunk each (usage.completion_tokens is their number unless `usage` is set). */
  words: string[]
  /**
   * Emits 'closed' when the connection of a request in 'hang', 'flood' or 'done-hold' mode closes; 'die' and 'error-event'
   * fail on 'go'; 'flood' writes 64 KiB chunks as fast as they are taken (counted in `sent`) until
   * FLOOD_LIMIT bytes went out ('never-blocked').
   */
  events: EventEmitter
  /** Bytes a 'flood' reply has written so far. */
  sent: number
  /** The connections generation requests came on (each once), and the requests 'drop-kept' dropped. */
  connections: Set<unknown>
  dropped: number
  /** Stops the server: its connections close and new ones are refused. */
  close (): Promise<void>
}

/** An https server's certificate and key (PEM files): test/tls/certs.ts makes them. */
export interface FakeTls { cert: string, key: string }

/** What a 'flood' reply writes at most, bytes: far more than the socket buffers between it and a client that stopped reading. */
export const FLOOD_LIMIT = 128 << 20

/** Rejects after `ms`: a generous bound on an event that must come (not a timing). */
export const within = <T>(p: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([p, new Promise<T>((_resolve, reject) => setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms).unref())])

/**
 * A client that reads nothing after the first piece of a flooding stream (`open` sends it with the signal):
 * asserts that the server's writes stall once the socket buffers on the way are full (a few MB) instead of lb
 * reading all FLOOD_LIMIT bytes into its memory, then that aborting the client closes the server's request.
 * "Stalled" is quiescence (no byte sent for 2 s), not a time bound: a slow machine only makes it come later.
 */
export async function assertFloodStalls (fake: FakeOpenAi, open: (signal: AbortSignal) => Promise<Response>): Promise<void> {
  fake.mode = 'flood'
  let flooded = false
  fake.events.once('never-blocked', () => { flooded = true })
  const ac = new AbortController()
  const res = await open(ac.signal)
  await res.body!.getReader().read()
  let last = -1
  let still = 0
  await waitFor(() => {
    still = fake.sent === last ? still + 1 : 0
    last = fake.sent
    return flooded || still >= 8
  }, 'the flood to stall or end', 120_000, 250)
  assert.ok(!flooded && fake.sent < FLOOD_LIMIT, `the server wrote ${fake.sent} bytes to a client that reads nothing`)
  const closed = once(fake.events, 'closed')
  ac.abort()
  await within(closed, 10_000, 'close of the upstream request')
  fake.mode = 'ok'
}

const chunk = (model: string, chat: boolean, text: string | null, finish: string | null, usage?: unknown): string => {
  const choice = chat ? { index: 0, delta: text === null ? {} : { content: text }, finish_reason: finish } : { index: 0, text: text ?? '', finish_reason: finish }
  const o: Record<string, unknown> = { id: 'x', object: chat ? 'chat.completion.chunk' : 'text_completion', created: 1, model, choices: usage === undefined ? [choice] : [] }
  if (usage !== undefined) o.usage = usage
  return `data: ${JSON.stringify(o)}\n\n`
}

/** Starts the server on a free loopback port, listing `models`; stopped in t.after. */
/**
 * `tls`: an https server (its URL names localhost). Mode 'drop-kept' closes a kept-alive connection when a request
 * comes on it, without an answer, as a server does that closed it while idle just as lb sent on it.
 */
export async function startFakeOpenAi (t: TestContext, models: string[], tls: FakeTls | null = null): Promise<FakeOpenAi> {
  const fake: FakeOpenAi = { url: '', bodies: [], auth: [], mode: 'ok', words: ['Hello', ' there', ' friend'], events: new EventEmitter(), sent: 0, connections: new Set(), dropped: 0, close: async () => {} }
  /** requests each connection carried */
  const carried = new WeakMap<object, number>()
  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const n = (carried.get(req.socket) ?? 0) + 1
    carried.set(req.socket, n)
    if (fake.mode === 'drop-kept' && n > 1 && req.method === 'POST') {
      fake.dropped++
      req.socket.destroy()
      return
    }
    if (req.method === 'POST') fake.connections.add(req.socket)
    const chunks: Buffer[] = []
    fake.auth.push(req.headers.authorization ?? '')
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      if (req.method === 'GET' && req.url === '/v1/models') {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ object: 'list', data: models.map((id) => ({ id, object: 'model', created: 1700000000, owned_by: 'fake' })) }))
        return
      }
      if (req.method === 'POST' && req.url === '/v1/embeddings') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
        fake.bodies.push(body)
        res.writeHead(200, { 'content-type': 'application/json' })
        const data = (body.input as string[]).map((_s, index) => ({ object: 'embedding', embedding: [3, 4], index }))
        res.end(JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: 5, total_tokens: 5 } }))
        return
      }
      const chat = req.url === '/v1/chat/completions'
      if (req.method !== 'POST' || (!chat && req.url !== '/v1/completions')) {
        res.writeHead(404).end()
        return
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      fake.bodies.push(body)
      const model = String(body.model)
      if (fake.mode === 'fail500' || fake.mode === 'fail400') {
        const status = fake.mode === 'fail500' ? 500 : 400
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ error: { message: `fake says ${status}`, type: 'x', param: status === 400 ? 'temperature' : null, code: null } }))
        return
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      if (fake.mode === 'flood') {
        res.on('close', () => fake.events.emit('closed'))
        const piece = chunk(model, chat, 'x'.repeat(64 << 10), null)
        const more = (): void => {
          while (fake.sent < FLOOD_LIMIT) {
            fake.sent += piece.length
            if (!res.write(piece)) {
              res.once('drain', more)
              return
            }
          }
          fake.events.emit('never-blocked', fake.sent)
        }
        more()
        return
      }
      if (fake.mode === 'hang') {
        res.write(chunk(model, chat, fake.words[0]!, null))
        res.on('close', () => fake.events.emit('closed'))
        return
      }
      res.write(chunk(model, chat, fake.words[0]!, null))
      // after the first chunk, the test says when to fail (once that chunk reached its client)
      if (fake.mode === 'die') {
        // the server dies mid-reply: the connection goes, no end
        fake.events.once('go', () => res.socket?.destroy())
        return
      }
      if (fake.mode === 'error-event') {
        fake.events.once('go', () => res.end(`data: ${JSON.stringify({ error: { message: 'fake broke mid-stream', type: 'server_error' } })}\n\n`))
        return
      }
      let out = ''
      for (const w of fake.words.slice(1)) out += chunk(model, chat, w, null)
      out += chunk(model, chat, null, 'stop')
      if (body.stream_options?.include_usage === true && fake.mode !== 'no-usage') out += chunk(model, chat, null, null, { prompt_tokens: 7, completion_tokens: fake.words.length, total_tokens: 7 + fake.words.length })
      if (fake.mode === 'done-hold') {
        // [DONE] sent, the reply never ended: 'closed' when the connection goes
        res.write(out + 'data: [DONE]\n\n')
        res.on('close', () => fake.events.emit('closed'))
        return
      }
      res.end(out + 'data: [DONE]\n\n')
    })
  }
  const server = tls === null ? createServer(handler) : createTlsServer({ cert: readFileSync(tls.cert), key: readFileSync(tls.key) }, handler)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  fake.close = () => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) })
  t.after(() => fake.close())
  const port = (server.address() as AddressInfo).port
  fake.url = tls === null ? `http://127.0.0.1:${port}` : `https://localhost:${port}`
  return fake
}
