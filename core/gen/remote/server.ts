// One remote model server: what it serves (re-read every `refresh`), what it
// has loaded, whether it is up, and the requests in flight to it per model.
// Health is passive, as for web backends: a failed refresh or request marks
// the server down (it is skipped), the next successful refresh brings it back.
// The in-flight counters are exact across threads: they live in shared memory
// (core/shm/model-inflight.ts), where a data-plane worker that admits a
// request itself counts it too (core/gen/edge/); without shared memory (a
// service started alone, in tests and benches) or past its slots, here.

import { request } from 'undici'
import type { RemoteServerConf } from '../../config/generation.js'
import type { Logger } from '../../log.js'
import { addInFlight, inFlightAt, type ModelSlots } from '../../shm/model-inflight.js'
import { parseModelName } from '../models/names.js'

/** A refresh that takes longer than this fails (the server is down): ms. */
const REFRESH_TIMEOUT_MS = 5_000
/** Bytes of a listing read at most (a server listing thousands of models stays far below). */
const MAX_LISTING = 8 << 20

export interface RemoteModel {
  /** The name as the server spells it (sent back to it in requests). */
  served: string
  /** The server's own entry: Ollama's /api/tags object or OpenAI's model object. */
  entry: Record<string, unknown>
}

export class RemoteServer {
  readonly conf: RemoteServerConf
  private readonly log: Logger
  up = false
  /** A refresh succeeded once. */
  reached = false
  /** Why the server is down ('' when up). */
  reason = 'not reached yet'
  /** Canonical name -> model. Replaced whole by each refresh. */
  models = new Map<string, RemoteModel>()
  /** Canonical name -> the server's /api/ps entry (ollama and lb kinds; an openai-kind server serves what it lists). */
  loaded = new Map<string, Record<string, unknown>>()
  private readonly inFlight = new Map<string, number>()
  /** Called after a refresh, markDown or forget (the registry's listing may have changed: RemoteRegistry.onListing). */
  onChange: (() => void) | null = null
  private refreshing: Promise<void> | null = null

  readonly #slots: ModelSlots | null

  constructor (conf: RemoteServerConf, log: Logger, slots: ModelSlots | null = null) {
    this.conf = conf
    this.log = log
    this.#slots = slots
  }

  /** The shared-memory slot of the count of `model`'s requests in flight here; -1: counted in this process. */
  slot (model: string): number {
    return this.#slots === null ? -1 : this.#slots.slotOf(this.conf.name, model)
  }

  /** Headers of every request to the server: the key as a bearer token when one is set. */
  headers (): Record<string, string> {
    const h: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, application/x-ndjson, text/event-stream' }
    if (this.conf.apiKey !== '') h.authorization = `Bearer ${this.conf.apiKey}`
    return h
  }

  /** The model is loaded there (or, on an openai-kind server, listed: such servers serve what they have loaded). */
  isLoaded (model: string): boolean {
    return this.conf.kind === 'openai' ? this.models.has(model) : this.loaded.has(model)
  }

  requests (model: string): number {
    const slot = this.slot(model)
    return slot >= 0 ? inFlightAt(this.#slots!.i32, slot) : this.inFlight.get(model) ?? 0
  }

  begin (model: string): void {
    const slot = this.slot(model)
    if (slot >= 0) addInFlight(this.#slots!.i32, slot, 1)
    else this.inFlight.set(model, this.requests(model) + 1)
  }

  end (model: string): void {
    const slot = this.slot(model)
    if (slot >= 0) return addInFlight(this.#slots!.i32, slot, -1)
    const n = this.requests(model) - 1
    if (n > 0) this.inFlight.set(model, n)
    else this.inFlight.delete(model)
  }

  /** A request failed in a way that says the server is unwell: skip it until a refresh succeeds. */
  markDown (reason: string): void {
    if (this.up) this.log.warn('model server down', { server: this.conf.name, reason })
    this.up = false
    this.reason = reason
    this.onChange?.()
  }

  /** A request for `model` answered 404: the server no longer has it (until a refresh lists it again). */
  forget (model: string): void {
    this.models.delete(model)
    this.loaded.delete(model)
    this.onChange?.()
  }

  /** Reads the server's models again (one refresh at a time); never throws. */
  refresh (): Promise<void> {
    this.refreshing ??= this.doRefresh().finally(() => { this.refreshing = null })
    return this.refreshing
  }

  private async doRefresh (): Promise<void> {
    try {
      const models = new Map<string, RemoteModel>()
      const loaded = new Map<string, Record<string, unknown>>()
      if (this.conf.kind === 'openai') {
        for (const m of list(await this.get('/v1/models'), 'data')) add(models, m, m.id)
      } else {
        for (const m of list(await this.get('/api/tags'), 'models')) add(models, m, m.name ?? m.model)
        for (const m of list(await this.get('/api/ps'), 'models')) {
          const name = typeof m.name === 'string' ? parseModelName(m.name) : null
          if (name !== null) loaded.set(name, m)
        }
      }
      this.models = models
      this.loaded = loaded
      if (!this.up) this.log.info('model server up', { server: this.conf.name, models: models.size })
      this.up = true
      this.reached = true
      this.reason = ''
      this.onChange?.()
    } catch (e) {
      this.markDown(`refresh failed: ${(e as Error).message}`)
    }
  }

  private async get (path: string): Promise<unknown> {
    const r = await request(this.conf.url + path, { headers: this.headers(), signal: AbortSignal.timeout(REFRESH_TIMEOUT_MS) })
    let size = 0
    const chunks: Buffer[] = []
    for await (const c of r.body as AsyncIterable<Buffer>) {
      size += c.length
      if (size > MAX_LISTING) {
        r.body.destroy()
        throw new Error(`GET ${path}: a listing larger than ${MAX_LISTING} bytes`)
      }
      chunks.push(c)
    }
    if (r.statusCode !== 200) throw new Error(`GET ${path} answered ${r.statusCode}`)
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  }
}

/** The objects of a listing's array field. */
function list (body: unknown, field: string): Array<Record<string, unknown>> {
  const a = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[field] : undefined
  if (!Array.isArray(a)) throw new Error(`a listing without "${field}"`)
  return a.filter((x): x is Record<string, unknown> => typeof x === 'object' && x !== null)
}

function add (models: Map<string, RemoteModel>, entry: Record<string, unknown>, served: unknown): void {
  if (typeof served !== 'string') return
  const name = parseModelName(served)
  if (name !== null && !models.has(name)) models.set(name, { served, entry })
}
