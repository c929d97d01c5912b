// A small OTLP/HTTP receiver for the tracing tests: POST /v1/traces with the
// JSON encoding (ExportTraceServiceRequest), answered 200 {}. It keeps every
// span with its resource attributes, and can go away (its port closed), come
// back on the same port, or hold its answers (a slow collector).
import http from 'node:http'
import type net from 'node:net'

export interface OtlpValue { stringValue?: string, intValue?: string | number }
export interface OtlpSpan {
  traceId: string
  spanId: string
  parentSpanId?: string
  traceState?: string
  name: string
  kind: number
  startTimeUnixNano: string
  endTimeUnixNano: string
  attributes: Array<{ key: string, value: OtlpValue }>
  status: { code?: number }
  /** the resource's attributes, flattened (added here) */
  resource: Record<string, string>
}

export interface Collector {
  readonly port: number
  readonly endpoint: string
  readonly spans: OtlpSpan[]
  /** export requests received, with their headers */
  readonly posts: Array<{ headers: http.IncomingHttpHeaders, contentType: string }>
  /** answers this status (no span kept) until refuse(0) */
  refuse (status: number): void
  /** answers wait until release() (a slow collector) */
  hold (): void
  release (): void
  /** stops listening and drops open connections (a collector down) */
  down (): Promise<void>
  /** listens again on the same port */
  up (): Promise<void>
  close (): Promise<void>
}

/** An attribute's value as a string ('' when absent). */
export function attr (s: OtlpSpan, key: string): string {
  const v = s.attributes.find((a) => a.key === key)?.value
  return v === undefined ? '' : String(v.stringValue ?? v.intValue)
}

export async function startCollector (): Promise<Collector> {
  const spans: OtlpSpan[] = []
  const posts: Collector['posts'] = []
  let held: Array<() => void> | null = null
  let refusing = 0
  const sockets = new Set<net.Socket>()
  let server: http.Server
  let port = 0
  const listen = (): Promise<void> => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (d: Buffer) => chunks.push(d))
      req.on('end', () => {
        const answer = (): void => {
          if (req.method !== 'POST' || req.url !== '/v1/traces') {
            res.writeHead(404).end()
            return
          }
          posts.push({ headers: req.headers, contentType: req.headers['content-type'] ?? '' })
          if (refusing !== 0) {
            res.writeHead(refusing, { 'content-type': 'application/json' }).end('{"code":3,"message":"refused by the test"}')
            return
          }
          const body = JSON.parse(Buffer.concat(chunks).toString()) as {
            resourceSpans: Array<{ resource: { attributes: OtlpSpan['attributes'] }, scopeSpans: Array<{ spans: OtlpSpan[] }> }>
          }
          for (const rs of body.resourceSpans) {
            const resource = Object.fromEntries(rs.resource.attributes.map((a) => [a.key, String(a.value.stringValue ?? a.value.intValue)]))
            for (const ss of rs.scopeSpans) for (const s of ss.spans) spans.push({ ...s, resource })
          }
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
        }
        if (held === null) answer()
        else held.push(answer)
      })
    })
    server.on('connection', (s) => { sockets.add(s); s.on('close', () => sockets.delete(s)) })
    return new Promise((resolve) => server.listen(port, '127.0.0.1', () => {
      port = (server.address() as net.AddressInfo).port
      resolve()
    }))
  }
  await listen()
  const stop = (): Promise<void> => new Promise((resolve) => {
    for (const s of sockets) s.destroy()
    server.close(() => resolve())
  })
  return {
    get port () { return port },
    get endpoint () { return `http://127.0.0.1:${port}/v1/traces` },
    spans,
    posts,
    refuse: (status) => { refusing = status },
    hold: () => { held ??= [] },
    release: () => {
      const h = held ?? []
      held = null
      for (const a of h) a()
    },
    down: stop,
    up: listen,
    close: stop,
  }
}
