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
  },
  timeouts: {
    connectMs: 5_000, // upstream connect (seed: timeout connect 5s)
    clientMs: 50_000, // client may stay silent while sending a request body (seed: timeout client 50s)
    serverMs: 50_000, // upstream may stay silent while answering (seed: timeout server 50s)
    keepAliveMs: 65_000, // upstream idle keep-alive connections are closed after this (seed: keepalive_timeout 65s)
  },
  limits: {
    maxBodyBytes: 100 * 1024 * 1024, // seed: client_max_body_size 100M
  },
  service: {
    balance: 'roundrobin',
    keepalive: 32, // idle upstream connections kept per server per worker
    retries: 1, // idempotent requests whose connect fails are retried once on another server
  },
  server: {
    weight: 1,
    maxFails: 3, // passive: failures within failTimeout that take a server out (seed)
    failTimeoutMs: 30_000, // passive: counting window and time out of rotation (seed)
    check: true,
  },
  healthCheck: {
    path: '/health',
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
} as const
