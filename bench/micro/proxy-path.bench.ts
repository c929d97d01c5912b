// The JavaScript a proxied request runs between the two sockets, one piece per
// case: parsing the server's response head (the bytes of one socket read, as
// the upstream connection feeds them) and building the request head sent
// upstream. Inputs are what the benchmark backend (nginx) and a browser send.
import { ResponseParser, type ResponseSink } from '../../core/upstream/response-parser.js'
import { forwardHead } from '../../core/worker/proxy/forward-head.js'
import { browserCtx } from './fixtures.js'
import { type Result, isMain, runSuite } from './harness.js'

const NGINX = Buffer.from('HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Sun, 22 Nov 2026 12:01:16 GMT\r\n' +
  'Content-Type: text/plain\r\nContent-Length: 16\r\nConnection: keep-alive\r\n\r\n{"status":"ok"}\n')
const APP = Buffer.from('HTTP/1.1 200 OK\r\nServer: gunicorn\r\nDate: Sun, 22 Nov 2026 12:01:16 GMT\r\n' +
  'Content-Type: application/json; charset=utf-8\r\nContent-Length: 16\r\nCache-Control: private, max-age=0\r\n' +
  'Set-Cookie: session=4f2a9c1e7b3d8a60; Path=/; HttpOnly; Secure; SameSite=Lax\r\nVary: Accept-Encoding\r\n' +
  'X-Request-Id: 0b6c1d2e-3f40-4152-a637-48596a7b8c9d\r\nETag: "5d8c72a5edda8d6a"\r\n\r\n{"status":"ok"}\n')

/** Keeps what a real sink keeps, so nothing the parser hands on is optimised away. */
class Sink implements ResponseSink {
  headers: string[] = []
  bytes = 0
  ends = 0
  onHead (_status: number, _reason: string, headers: string[]): void { this.headers = headers }
  onBody (_buf: Buffer, start: number, end: number): boolean { this.bytes += end - start; return true }
  onEnd (): void { this.ends++ }
}

const isHop = (k: string): boolean => k === 'connection' || k === 'keep-alive' || k === 'x-forwarded-for'

export async function run (): Promise<Result[]> {
  const parser = new ResponseParser()
  const sink = new Sink()
  const parse = (res: Buffer) => (): void => {
    parser.reset(sink, false)
    const err = parser.feed(res, 0, res.length)
    if (err !== null) throw new Error(err)
  }
  const ctx = browserCtx()
  let head = ''
  const out = await runSuite('proxy path', {
    'response head + body, nginx (5 headers)': parse(NGINX),
    'response head + body, app server (10 headers)': parse(APP),
    'request head, browser GET (6 headers)': () => { head = forwardHead(ctx, ctx.method, isHop, 'b1', '') },
  })
  if (sink.ends === 0 || head === '') throw new Error('nothing ran')
  return out
}

if (isMain(import.meta.url)) await run()
