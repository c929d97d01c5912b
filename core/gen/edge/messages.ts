// The messages of a remote model's request relayed in a data-plane worker
// ([generation] relay = "worker"): the worker asks the control plane once per
// request start (admit), again only when a server failed before the first
// piece reached the client (retry), and tells it once how the request ended
// (end). No message per token. They cross the worker's MessagePort inside
// core/protocol.ts's { type: 'gen' } and { type: 'gen-answer' }; the listing
// goes the other way whenever it changes ({ type: 'gen-listing' }).
// A request is named by the worker's own id (per worker, from 1): the control
// plane keys it by (worker index, id).

import type { RemoteKind } from '../../config/generation.js'
import type { ApiError } from '../dispatch/request.js'
import type { GenOutcome } from '../stats.js'

/** One remote server as the workers see it: enough to pick it and call it without asking (EdgeAdmitted). */
export interface ListedServer {
  readonly name: string
  readonly up: boolean
  /** Canonical names; served, loaded and slots are per models[i]. */
  readonly models: readonly string[]
  /** The server's spelling of the model (sent back to it). */
  readonly served: readonly string[]
  readonly loaded: readonly boolean[]
  /** The shared-memory slot of its requests in flight (core/shm/model-inflight.ts); -1: the control plane counts it. */
  readonly slots: readonly number[]
  readonly call: EdgeServer
}

/** Which remote server lists which models, whether it is up, and the models the service has itself; the worker's snapshot. */
export interface RemoteListing {
  readonly servers: readonly ListedServer[]
  /** Models the service has on this machine (canonical names): a chain with one of them is the service's to serve. */
  readonly local: readonly string[]
}

/** Worker → control plane: may this request run, and where? */
export interface EdgeAdmit {
  readonly kind: 'admit'
  readonly id: number
  /** Consumer.id (a key's consumer name, "user:..." or "addr:..."): never the key. */
  readonly consumer: string
  /** The canonical name the client asked (an alias is allowed or not as such) and the name it spelled. */
  readonly model: string
  readonly displayModel: string
  /** Tokens reserved in the consumer's budget while it runs (dispatch/generation.ts reservation). */
  readonly reserve: number
  readonly endpoint: 'generate' | 'chat'
  readonly stream: boolean
  /** When the worker took the request: process.hrtime.bigint(), one clock for every thread (TTFT). */
  readonly arrived: bigint
}

/**
 * Worker → control plane: a request the worker admitted itself, not waiting for an answer: on its consumer's
 * budget in shared memory (its ticket's `minute` and `day`, `reserve` reserved), and the worker picked `server` for
 * the chain's first model from its listing, its in-flight count at `slot` already counted. The control plane takes
 * it from there as if it had answered an admit (retry, end).
 */
export interface EdgeAdmitted extends Omit<EdgeAdmit, 'kind'> {
  readonly kind: 'admitted'
  readonly server: string
  readonly slot: number
  readonly minute: number
  readonly day: number
}

/** Worker → control plane: the server named last could not start the reply (nothing reached the client). */
export interface EdgeRetry {
  readonly kind: 'retry'
  readonly id: number
  readonly error: ApiError
  /** The server is unwell: mark it down. */
  readonly down: boolean
  /** The server does not have the model (404): forget it there. */
  readonly missing: boolean
}

/** Worker → control plane: the request ended (its server's in-flight count, its budget, its usage metrics). */
export interface EdgeEnd {
  readonly kind: 'end'
  readonly id: number
  readonly outcome: GenOutcome
  /** Nothing ran (the admission came too late): not counted, the reservation given back. */
  readonly refund: boolean
  /** Pieces that reached the client (charged one token each when there is no result). */
  readonly pieces: number
  /** When the first piece was written (process.hrtime.bigint(); 0n: none) and when the request ended. */
  readonly first: bigint
  readonly end: bigint
  /** The tokens the server reported, when the reply was complete; null otherwise. */
  readonly result: { readonly promptTokens: number, readonly completionTokens: number } | null
}

export type EdgeToControl = EdgeAdmit | EdgeAdmitted | EdgeRetry | EdgeEnd

/** What a worker needs to call a server: its wire, address and headers (its key among them: this never leaves lb). */
export interface EdgeServer {
  readonly name: string
  readonly kind: RemoteKind
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
}

/**
 * Control plane → worker, the answer to admit or retry: go the old way (through the service's socket: a local
 * model, one no server lists any more, a consumer it does not know), a refusal to write in the caller's shape
 * (counted already), or the server to call for `served` (the server's spelling of the model).
 */
export type EdgeAnswer =
  | { readonly go: 'service' }
  | { readonly error: ApiError }
  | { readonly server: EdgeServer, readonly served: string }
