// An OpenAI-shaped model server for bench/gen/relay.ts: /v1/models lists
// "fake"; /v1/chat/completions streams `max_tokens` content chunks (SSE, as
// vLLM and llama.cpp's server do: content chunks, a finish chunk, a usage chunk
// when stream_options.include_usage, then [DONE]). "fast" writes them as fast
// as the socket takes them; "paced" one every 20 ms, as a GPU server decodes,
// the first exactly 20 ms after the request (below, SPIN_MS).
//
//   node dist/bench/gen/fake-model-server.js fast|paced     (prints "listening PORT")
import http from 'node:http'
import type { AddressInfo } from 'node:net'

const mode = process.argv[2] === 'paced' ? 'paced' : 'fast'
const PACE_MS = 20
/**
 * The paced first token is due PACE_MS after the request to the µs: its timer is set SPIN_MS early and the rest is
 * waited out on the clock. libuv's timers run on a millisecond clock, so a plain 20 ms timer fires 0-1 ms late by
 * where the request fell within its millisecond, and that lateness, not lb's share, would set the time to first
 * token added through lb (a request delayed by 0.2 ms may wait a whole millisecond more, or none).
 */
const SPIN_MS = 2

const chunk = (id: string, delta: object, finish: string | null): string =>
  `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: 'fake', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`

const server = http.createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/v1/models') {
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ object: 'list', data: [{ id: 'fake', object: 'model', created: 0, owned_by: 'bench' }] }))
    return
  }
  if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
    res.statusCode = 404
    res.end()
    return
  }
  let body = ''
  req.on('data', (d: Buffer) => { body += d.toString() })
  req.on('end', () => {
    const due = process.hrtime.bigint() + BigInt(PACE_MS * 1e6)
    const r = JSON.parse(body) as { max_tokens?: number, stream_options?: { include_usage?: boolean } }
    const n = r.max_tokens ?? 100
    const id = 'chatcmpl-bench'
    const piece = chunk(id, { content: 'tok ' }, null)
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    res.write(chunk(id, { role: 'assistant', content: '' }, null))
    let sent = 0
    const finish = (): void => {
      res.write(chunk(id, {}, 'length'))
      if (r.stream_options?.include_usage === true) {
        res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: 'fake', choices: [], usage: { prompt_tokens: 1, completion_tokens: n, total_tokens: n + 1 } })}\n\n`)
      }
      res.end('data: [DONE]\n\n')
    }
    if (mode === 'paced') {
      const next = (): boolean => {
        if (res.destroyed) return false
        res.write(piece)
        if (++sent < n) return true
        finish()
        return false
      }
      setTimeout(() => {
        while (process.hrtime.bigint() < due) { /* the last SPIN_MS at most */ }
        if (!next()) return
        const t = setInterval(() => { if (!next()) clearInterval(t) }, PACE_MS)
      }, PACE_MS - SPIN_MS)
      return
    }
    const more = (): void => {
      while (sent < n) {
        sent++
        if (!res.write(piece)) { res.once('drain', more); return }
      }
      finish()
    }
    more()
  })
})
server.keepAliveTimeout = 120_000
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`))
process.on('SIGTERM', () => { server.closeAllConnections(); server.close(() => process.exit(0)) })
