// Every default value of the configuration, with its unit. conf/lb.toml
// documents the same values; nowhere else defines a default.

export const DEFAULTS = {
  global: {
    workers: 'auto', // 'auto' = one data-plane worker thread per CPU
    maxConnections: 100_000, // client connections over all workers (seed: maxconn 100000)
    logLevel: 'info',
    accessLog: 'stdout', // 'stdout' | 'off' | a file path
    stateDir: 'run', // runtime state: sockets, the config API's state file (relative to the config file)
    drainTimeoutMs: 10_000, // SIGTERM: how long in-flight requests may finish
    pluginsDir: '', // a folder searched for plugin packages ('' = none; relative to the config file)
  },
  timeouts: {
    connectMs: 5_000, // upstream connect (seed: timeout connect 5s)
    clientMs: 50_000, // client may stay silent while sending a request body (seed: timeout client 50s)
    serverMs: 50_000, // upstream may stay silent while answering (seed: timeout server 50s)
    keepAliveMs: 65_000, // upstream idle keep-alive connections are closed after this
    // a client connection whose request head is not complete after this is closed (HAProxy `timeout
    // http-request`, nginx client_header_timeout); uWS's own value before it was a setting
    headerMs: 30_000,
    // an idle client connection between requests, or a client reading nothing of a response, is closed
    // after this (seed: keep-alive time-out 65 s; nginx keepalive_timeout and send_timeout)
    clientKeepAliveMs: 65_000,
    // WebSocket and TCP sessions: closed after this long with no byte either way (HAProxy `timeout tunnel`;
    // unset there, the seed's client/server time-outs of 50s apply)
    tunnelMs: 50_000,
  },
  limits: {
    maxBodyBytes: 100 * 1024 * 1024, // seed: client_max_body_size 100M
    // a request head (request line and headers): HAProxy's default buffer (tune.bufsize 16k); nginx serves
    // 8k a line and 32k in all (large_client_header_buffers 4 8k); uWS's own 4 KiB refused an 8 KB Cookie
    maxHeaderBytes: 16 * 1024,
    // revoked sessions (oidc logouts) kept at once, until each session's own end; 16 B each (1 MiB). When full,
    // every session born until then is refused (core/shm/revocations.ts): room for 1.5 logouts a second, sustained,
    // with 12-hour sessions
    sessionRevocations: 65_536,
  },
  service: {
    balance: 'roundrobin',
    keepalive: 32, // idle upstream connections kept per server per worker
    retries: 1, // a request that fails before any response byte is tried once more on another server (see core/worker/proxy/proxy.ts)
    retryTimeoutMs: 0, // no limit on when the last retry may start (nginx proxy_next_upstream_timeout 0)
  },
  server: {
    weight: 1,
    maxFails: 3, // passive: failures within failTimeout that take a server out (seed)
    failTimeoutMs: 30_000, // passive: counting window and time out of rotation (seed)
    check: true,
    maintenance: false, // true = administratively out of rotation (config API "maintenance": "enabled")
  },
  healthCheck: {
    type: 'http', // 'http' (GET path, expect status) | 'tcp' (a connect passes: for tcp entry points' services) | 'grpc' (Health/Check says SERVING)
    path: '/health',
    grpcService: '', // type 'grpc': the server as a whole
    intervalMs: 2_000, // HAProxy inter 2s
    timeoutMs: 1_000,
    rise: 2, // consecutive passes to come back (HAProxy)
    fall: 3, // consecutive failures to go down (HAProxy)
    status: 200,
  },
  status: {
    allow: ['127.0.0.1', '::1'] as readonly string[], // seed: status page allowed from loopback only
  },
  router: {
    priority: 0, // 0 = derive from the rule's length, as Traefik
  },
  // https entry points ([entrypoints.X.tls], core/config/tls.ts)
  tls: {
    // TLS 1.2 ciphers: Mozilla "intermediate" ECDHE AEAD suites. TLS 1.3 suites are not part of this list
    // (see docs/tls-ws-tcp.md for what each TLS stack lets us restrict); TLS 1.0 and 1.1 are always refused.
    ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:' +
      'ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305',
  },
  // request paths of http/https entry points (core/worker/request/request-path.ts)
  requestPath: {
    mergeSlashes: true, // "//" → "/" before routing (nginx merge_slashes on)
    // each ambiguous escape is refused (400) unless its option allows it (Traefik v3 encodedCharacters)
    allowEncoded: { slash: false, backSlash: false, nullCharacter: false, semicolon: false, percent: false, questionMark: false, hash: false },
  },
  entrypoint: {
    // http/https: the path lb answers itself with 200 "OK" (GET and HEAD only, any host, before routing,
    // not counted or logged); "off" routes that path like any other
    health: '/health',
    // http/https: "uws" (uWebSockets.js: the fastest) or "node" (Node's llhttp: HTTP/1.0, pipelining behind proxied
    // answers, trailers, absolute-form, a 408 for a slow head, 100-continue after routing; README "HTTP engines")
    engine: 'uws' as 'uws' | 'node',
  },
  // HTTP/2 to clients ([entrypoints.X.http2], core/config/http2.ts, core/worker/transport/h2/h2.ts)
  http2: {
    // https: ALPN offers h2 only when asked. On Node 20 an h2 entry point's TLS runs in worker 0 (node:tls: uWS
    // negotiates no ALPN), so turning it on moves HTTP/1.1-over-TLS encryption to one thread (README, "HTTP/2").
    enabled: false,
    maxConcurrentStreams: 250, // Traefik's and Go's default; nginx 128, HAProxy 100
    maxHeaderListSize: 64 * 1024, // decoded size, so an HPACK bomb (a small block that decodes large) stops here; 4x limits.max_header_bytes
    maxHeaderPairs: 128, // node's default; uWS refuses HTTP/1.1 heads of more than 100 lines
    initialWindowSize: 64 * 1024 - 1, // RFC 9113's initial value: a stream's upload buffered per client at most this
    idleTimeoutMs: 180_000, // Traefik's idleTimeout (180s); nginx keepalive_timeout 75s
  },
  websocket: {
    // largest client message, reassembled in memory by uWS before it is relayed (uWS's own default is 16 KiB);
    // a bigger one makes uWS close the connection at once. Messages from servers are streamed, never reassembled.
    maxMessageBytes: 16 * 1024 * 1024,
  },
  // management surfaces (core/admin): all off unless the config turns them on,
  // so a config without these sections opens no extra port or socket
  admin: {
    enabled: false, // config API (HAProxy Data Plane API v2 model)
    address: '127.0.0.1:5555', // loopback only by default
    users: [] as readonly string[], // "user:hash" (bcrypt $2a/$2b/$2y, or {SHA} base64 SHA-1); basic auth
    tokens: [] as readonly string[], // bearer tokens (Authorization: Bearer <token>)
    stateFile: 'config-api.json', // the config API's writes, relative to global.state_dir
    maxOpenTransactions: 20, // config API transactions in progress at once; one more answers 429 (Data Plane API max_open_transactions)
    // changes one transaction may stage: each staged change replays all before it, and they are held in memory
    maxTransactionChanges: 1_000,
  },
  dashboard: {
    address: '127.0.0.1:8081', // dashboard API, dashboard page and /metrics share this listener
    api: false, // Traefik-style /api/* (Traefik api.dashboard)
    page: false, // the /dashboard/ page (needs api and metrics to show data)
    metrics: false, // Prometheus /metrics
    insecure: false, // true = no authentication on this listener (Traefik api.insecure); else [admin] users/tokens
  },
  // ACME certificate resolvers ([certificates_resolvers.NAME.acme], core/config/acme.ts, core/acme/)
  acme: {
    caServer: 'https://acme-v02.api.letsencrypt.org/directory', // Let's Encrypt production (Traefik's default too)
    storage: 'acme.json', // relative to global.state_dir; JSON, mode 0600, replaced atomically
    keyType: 'EC256', // certificate keys: EC P-256; or RSA2048, RSA4096
    // renew this long before expiry; 0 = the default rule: 30 days, or a third of the lifetime when that is shorter
    renewBeforeMs: 0,
  },
  runtimeSocket: {
    enabled: false, // HAProxy-style runtime command socket
    path: 'lb.sock', // relative to global.state_dir; created with mode 0600
  },
  // [cluster] (core/config/cluster.ts): only when the section is present
  cluster: {
    prefix: 'lb:', // every Redis key of this cluster starts with it (several clusters on one Redis)
    syncIntervalMs: 100, // rate-limit counts exchanged with Redis this often
    maxWaitMs: 50, // a Redis command not answered within this counts as failed (a slow reply)
    fall: 3, // failed commands in a row (overlapping ones count once) before Redis is down: one slow reply is not an outage
    rise: 2, // answered commands in a row before a down Redis is up again (HAProxy's rise and fall defaults)
    nodeTtlMs: 3000, // a node that stops heartbeating leaves the membership after this
    insecure: false, // true = allow plain-text redis:// to a non-loopback host
  },
  // [tracing] (core/config/tracing.ts, core/worker/trace/): only when the section is present
  tracing: {
    serviceName: 'lb', // the service.name resource attribute (Traefik's default is "traefik")
    sampleRate: 1.0, // share of new traces recorded, 0..1; a valid traceparent's sampled flag decides for its trace (Traefik: 1.0)
    endpoint: 'https://localhost:4318/v1/traces', // OTLP/HTTP collector (Traefik's default)
    maxQueueSpans: 2048, // spans a worker holds for export; more are dropped and counted (OTel BatchSpanProcessor maxQueueSize)
    batchSize: 512, // spans per export request (OTel maxExportBatchSize)
    flushIntervalMs: 5_000, // a worker exports what it holds this often (OTel scheduledDelayMillis)
    exportTimeoutMs: 10_000, // an export not answered within this failed, and is retried with back-off (OTLP exporter timeout)
  },
} as const
