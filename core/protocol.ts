// Every message between the control plane (main thread) and the data-plane
// workers: the only wire definition. Each receiver switches on `type` with a
// `never` check. Configs cross as plain data (structured clone).
import type { Config } from './config/load.js'
import type { EdgeAnswer, EdgeToControl, RemoteListing } from './gen/edge/messages.js'
import type { PluginStatus } from './plugin.js'
import type { Revocation } from './shm/revocations.js'

/** Shared-memory slots of services and servers ("service/server"), assigned by the control plane. */
export interface Slots {
  readonly services: Readonly<Record<string, number>>
  readonly servers: Readonly<Record<string, number>>
  /** router name → slot of its request-stats rows (core/shm/request-stats.ts) */
  readonly routers: Readonly<Record<string, number>>
}

/** A certificate of an ACME resolver as workers serve it by SNI (core/acme/manager.ts writes the files). */
export interface AcmeCert {
  readonly hosts: readonly string[]
  /** the https entry points whose routers asked for it */
  readonly entrypoints: readonly string[]
  /** absolute paths of the PEM chain and key (uWS reads files) */
  readonly cert: string
  readonly key: string
  /** differs for every certificate issued for these hosts (its serial number): a new one is swapped in */
  readonly version: string
}

/** An http-01 challenge in progress: GET /.well-known/acme-challenge/<token> on `entrypoint` answers keyAuthorization. */
export interface AcmeChallenge {
  readonly entrypoint: string
  readonly keyAuthorization: string
}

/** A tls-alpn-01 challenge in progress: a handshake on `entrypoint` offering ALPN acme-tls/1 for its host gets this certificate. */
export interface AcmeAlpnChallenge {
  readonly entrypoint: string
  /** PEM of the self-signed challenge certificate (RFC 8737 §3) and its key */
  readonly cert: string
  readonly key: string
}

/** Everything ACME workers serve; sent whole on every change. */
export interface AcmeState {
  readonly certs: readonly AcmeCert[]
  /** token → challenge */
  readonly tokens: Readonly<Record<string, AcmeChallenge>>
  /** host name → tls-alpn-01 challenge */
  readonly alpn: Readonly<Record<string, AcmeAlpnChallenge>>
}

export const NO_ACME: AcmeState = Object.freeze({ certs: [], tokens: {}, alpn: {} })

export interface WorkerData {
  readonly index: number
  readonly workers: number
  readonly shm: SharedArrayBuffer
  readonly generation: number
  readonly config: Config
  readonly slots: Slots
  readonly acme: AcmeState
  /**
   * The session ticket keys of node:tls servers (48 bytes, node:tls's ticketKeys), made once per process: every
   * worker encrypts tickets with the same keys, so a session resumes whichever worker the next connection reaches.
   */
  readonly ticketKeys: Uint8Array
}

export type ToWorker =
  | { readonly type: 'config', readonly generation: number, readonly config: Config, readonly slots: Slots }
  /** the ACME certificates and challenge answers to serve from now on; acknowledged with 'acme-applied' */
  | { readonly type: 'acme', readonly seq: number, readonly state: AcmeState }
  /** the revocation the worker shared as `seq` is kept and shared by the control plane (or given up on: it never fails the worker) */
  | { readonly type: 'revoked', readonly seq: number }
  /** the remote model servers' listing changed ([generation] relay = "worker": core/gen/edge/) */
  | { readonly type: 'gen-listing', readonly listing: RemoteListing }
  /** the control plane's answer to a worker's question about request `id` (core/gen/edge/messages.ts) */
  | { readonly type: 'gen-answer', readonly id: number, readonly answer: EdgeAnswer }
  /** stop accepting, let requests in flight finish for `timeoutMs`, cut those left (503), then exit 0 */
  | { readonly type: 'drain', readonly timeoutMs: number }

export type FromWorker =
  /** listening; `ports`: the port of each public listener it opened, by entry point name (the bound one for port 0) */
  | { readonly type: 'ready', readonly index: number, readonly ports: Readonly<Record<string, number>> }
  | { readonly type: 'applied', readonly index: number, readonly generation: number }
  | { readonly type: 'rejected', readonly index: number, readonly generation: number, readonly message: string }
  | { readonly type: 'acme-applied', readonly index: number, readonly seq: number }
  | { readonly type: 'fatal', readonly index: number, readonly message: string }
  /** the drain deadline passed with `count` requests (and tunnels) still open: they were cut */
  | { readonly type: 'cut', readonly index: number, readonly count: number }
  /** a revocation a middleware added to the shared table (PluginEnv.shareRevocation): to keep and to share; answered with 'revoked' */
  | { readonly type: 'revoke', readonly index: number, readonly seq: number, readonly revocation: Revocation }
  /** a relayed generation request's admission, retry or end (core/gen/edge/messages.ts); admit and retry are answered with 'gen-answer' */
  | { readonly type: 'gen', readonly index: number, readonly msg: EdgeToControl }
  /** a middleware instance's state for the dashboard API (PluginEnv.setStatus) */
  | { readonly type: 'status', readonly index: number, readonly generation: number, readonly middleware: string, readonly status: PluginStatus, readonly message: string }
