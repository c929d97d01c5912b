// Per-request cost of the response filters (core/worker/request/client-filter.ts)
// the errors, buffering and contentType middlewares put around the client:
// their onRequest, the wrap, and a 4 KiB answer without Content-Type written
// through them (head, one body piece, end) into a client that discards it,
// against that answer written straight to the client. Also the sniffer alone.
// A quick check: BENCH_SECS=1 node dist/bench/micro/client-filters.bench.js
import Benchmark from 'benchmark'
import { createLogger } from '../../core/log.js'
import { type FilterHost, applyFilters } from '../../core/worker/request/client-filter.js'
import type { ClientResponse } from '../../core/worker/transport/client.js'
import { sniff } from '../../plugins/mime-sniff.js'
import { browserCtx, middlewares, resetCtx } from './fixtures.js'
import { type Result, isMain, runSuite } from './harness.js'

if (process.env.BENCH_SECS !== undefined) Benchmark.options.maxTime = Number(process.env.BENCH_SECS)

const PAGE = Buffer.from('<!DOCTYPE html><html><body>' + '<p>Product name, colour and size</p>\n'.repeat(120).slice(0, 4050) + '</body></html>')
const BIN = Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 7) & 255))
const HEADERS = ['cache-control', 'max-age=60', 'etag', '"abc"']

/** A client that takes everything and keeps nothing. */
const sink: ClientResponse = {
  aborted: false,
  started: false,
  websocket: null,
  trailers: null,
  onAbort () {},
  onBody () {},
  pauseBody () {},
  resumeBody () {},
  head () {},
  body () { return true },
  onDrain () {},
  end () {},
  send () {},
  bodyBytes (b: string) { return b.length },
  destroy () {},
}

const host: FilterHost = {
  log: createLogger('error'),
  conf: { limits: { maxBodyBytes: 100 * 1024 * 1024 } },
  error () {},
  finish () {},
  fetchPage () { return () => {} },
}

export async function run (): Promise<Result[]> {
  const hooks = middlewares(`[services.pages]
[[services.pages.servers]]
address = "127.0.0.1:9"
[middlewares.pages]
type = "errors"
status = ["500-599"]
service = "pages"
[middlewares.buffered]
type = "buffering"
[middlewares.typed]
type = "contentType"
`)
  const ctx = browserCtx()
  /** one request through `name`'s onRequest, the wrap, and the answer */
  const through = (name: string) => () => {
    resetCtx(ctx)
    ctx.filters = null
    void hooks.get(name)!.onRequest!(ctx)
    const c = applyFilters(ctx, sink, host)
    c.head(200, 'OK', HEADERS, -1)
    c.body(PAGE, 0, PAGE.length)
    c.end()
  }
  return runSuite('response filters', {
    'no filter: a 4 KiB answer straight to the client': () => {
      resetCtx(ctx)
      const c = applyFilters(ctx, sink, host)
      c.head(200, 'OK', HEADERS, -1)
      c.body(PAGE, 0, PAGE.length)
      c.end()
    },
    'errors, status not caught': through('pages'),
    'contentType: head held, first bytes sniffed': through('typed'),
    'buffering: the answer held whole, sent with its length': through('buffered'),
    'sniff alone: HTML': () => { sniff(PAGE) },
    'sniff alone: 512 binary bytes (every signature tried)': () => { sniff(BIN) },
  })
}

if (isMain(import.meta.url)) await run()
