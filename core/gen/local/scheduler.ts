// Admission and residency, decided in the control plane so the runner stays a
// dumb executor that can die at any time:
// - per model, at most `parallel × contexts` jobs run at once (the runner then
//   always has a free sequence); the rest wait in FIFO order;
// - at most `maxQueue` jobs wait in total; beyond that submit() refuses (503);
// - a model idle for its keep-alive is unloaded; so is the least recently used
//   idle model when a new one would exceed `maxLoaded`;
// - when the runner dies, every running job fails at once with a clear 500 and
//   the waiting ones are dispatched again once a new runner is ready.
// A job's sink is detached when its client goes away or it times out; later
// messages for it are dropped, and its slot is freed only when the runner says
// the job ended (that is what "stopped" means). A job cancelled with a grace
// (a time-out) that the runner has not ended within it is stuck where no abort
// reaches (a native call): the runner is killed, which frees everything, so no
// request holds the runner beyond request_timeout + grace.

import type { FromRunner, JobResult, JobSpec, ToRunner } from './protocol.js'

export interface JobSink {
  /** Consecutive pieces of the reply; `ts` is the batch's arrival time (created_at). */
  pieces (texts: readonly string[], ts: string): void
  done (r: JobResult): void
  fail (status: number, message: string): void
}

export interface RunnerLink {
  readonly ready: boolean
  send (m: ToRunner): boolean
  /** Kills the runner (it is restarted); `reason` is what the jobs running on it are told. */
  kill (reason: string): void
}

interface Job {
  id: number
  spec: JobSpec
  keepAliveMs: number
  sink: JobSink | null
  running: boolean
  /** Armed by cancel() with a grace: kills the runner if the job has not ended by then. */
  watchdog: NodeJS.Timeout | null
}

interface ModelState {
  name: string
  path: string
  running: number
  waiting: Job[]
  loaded: boolean
  keepAliveMs: number
  /** Epoch ms when an idle model will be unloaded; Infinity = never; 0 = not idle. */
  expiresAt: number
  timer: NodeJS.Timeout | null
  lastUsed: number
  sizeBytes: number
  numCtx: number
}

export interface LoadedModel { name: string, expiresAt: number, sizeBytes: number, numCtx: number }

export class Scheduler {
  private readonly capacity: number
  private readonly maxQueue: number
  private readonly maxLoaded: number
  private readonly link: RunnerLink
  private readonly jobs = new Map<number, Job>()
  private readonly models = new Map<string, ModelState>()
  private nextId = 1
  private waitingCount = 0
  /** Counters read by stats(). */
  tokens = 0
  promptTokens = 0

  constructor (capacity: number, maxQueue: number, maxLoaded: number, link: RunnerLink) {
    this.capacity = capacity
    this.maxQueue = maxQueue
    this.maxLoaded = maxLoaded
    this.link = link
  }

  get queueDepth (): number { return this.waitingCount }
  get inFlight (): number { return this.jobs.size - this.waitingCount }

  /** Queues a job; returns its id, or 0 when the queue is full. */
  submit (spec: JobSpec, keepAliveMs: number, sizeBytes: number, sink: JobSink): number {
    const m = this.model(spec.model, spec.modelPath, sizeBytes)
    if (m.running >= this.capacity || !this.link.ready || m.waiting.length > 0) {
      if (this.waitingCount >= this.maxQueue) return 0
    }
    const job: Job = { id: this.nextId++, spec, keepAliveMs, sink, running: false, watchdog: null }
    this.jobs.set(job.id, job)
    m.waiting.push(job)
    this.waitingCount++
    this.touch(m)
    this.pump()
    return job.id
  }

  /**
   * Detaches a job from its client; a running one is told to stop (it frees its slot when it does).
   * graceMs > 0: if the runner has not ended it that many ms later, the runner is killed.
   */
  cancel (id: number, graceMs = 0): void {
    const job = this.jobs.get(id)
    if (job === undefined) return
    job.sink = null
    if (job.running) {
      this.link.send({ type: 'cancel', id })
      if (graceMs > 0 && job.watchdog === null) {
        job.watchdog = setTimeout(() => {
          if (this.jobs.get(id) === job) this.link.kill(`the model runner was restarted: job ${id} did not stop within ${graceMs / 1000}s (generation.cancel_grace) of its time-out`)
        }, graceMs)
        job.watchdog.unref()
      }
      return
    }
    const m = this.models.get(job.spec.model)!
    m.waiting.splice(m.waiting.indexOf(job), 1)
    this.waitingCount--
    this.jobs.delete(id)
    this.idle(m)
  }

  /** Unloads a model now if idle, else as soon as it becomes idle (Ollama's keep_alive 0). Returns whether it was loaded. */
  unload (name: string): boolean {
    const m = this.models.get(name)
    if (m === undefined || !m.loaded) return false
    m.keepAliveMs = 0
    this.idle(m)
    return true
  }

  loaded (): LoadedModel[] {
    const out: LoadedModel[] = []
    for (const m of this.models.values()) {
      if (m.loaded) out.push({ name: m.name, expiresAt: m.expiresAt === 0 ? Date.now() + Math.max(m.keepAliveMs, 0) : m.expiresAt, sizeBytes: m.sizeBytes, numCtx: m.numCtx })
    }
    return out
  }

  /** A batch from the runner, in order. */
  onMessages (msgs: readonly FromRunner[], ts: string): void {
    for (const msg of msgs) {
      switch (msg.type) {
        case 'ready':
          break
        case 'pieces':
          this.jobs.get(msg.id)?.sink?.pieces(msg.texts, ts)
          break
        case 'done': {
          const job = this.finish(msg.id)
          if (job === null) break
          this.tokens += msg.result.evalTokens
          this.promptTokens += msg.result.promptTokens
          const m = this.models.get(job.spec.model)!
          if (msg.result.doneReason !== 'cancel') {
            m.loaded = true
            m.numCtx = job.spec.numCtx
          }
          job.sink?.done(msg.result)
          this.idle(m)
          break
        }
        case 'failed': {
          const job = this.finish(msg.id)
          job?.sink?.fail(msg.status, msg.message)
          if (job !== null) this.idle(this.models.get(job.spec.model)!)
          break
        }
        default: { const never: never = msg; throw new Error(`unknown runner message ${JSON.stringify(never)}`) }
      }
    }
    this.pump()
  }

  /** The runner died: running jobs fail, nothing is loaded any more. */
  onRunnerExit (reason: string): void {
    for (const job of [...this.jobs.values()]) {
      if (!job.running) continue
      this.finish(job.id)
      job.sink?.fail(500, reason)
    }
    for (const m of this.models.values()) {
      m.loaded = false
      this.clearTimer(m)
    }
  }

  /** The runner is (again) ready: dispatch what waits. */
  onRunnerReady (): void { this.pump() }

  /** Fails everything (shutdown). */
  close (message: string): void {
    for (const job of this.jobs.values()) {
      if (job.watchdog !== null) clearTimeout(job.watchdog)
      job.sink?.fail(503, message)
    }
    this.jobs.clear()
    for (const m of this.models.values()) { this.clearTimer(m); m.waiting.length = 0 }
    this.waitingCount = 0
  }

  private finish (id: number): Job | null {
    const job = this.jobs.get(id)
    if (job === undefined || !job.running) return null
    this.jobs.delete(id)
    if (job.watchdog !== null) clearTimeout(job.watchdog)
    const m = this.models.get(job.spec.model)!
    m.running--
    m.keepAliveMs = job.keepAliveMs
    return job
  }

  private model (name: string, path: string, sizeBytes: number): ModelState {
    let m = this.models.get(name)
    if (m === undefined || m.path !== path) {
      if (m !== undefined) this.clearTimer(m)
      if (m !== undefined && m.loaded && m.running === 0) this.link.send({ type: 'unload', modelPath: m.path })
      // Jobs already running on the old file keep counting against this model until they end.
      m = { name, path, running: m?.running ?? 0, waiting: m?.waiting ?? [], loaded: false, keepAliveMs: 0, expiresAt: 0, timer: null, lastUsed: 0, sizeBytes, numCtx: 0 }
      this.models.set(name, m)
    }
    return m
  }

  private touch (m: ModelState): void {
    m.lastUsed = Date.now()
    m.expiresAt = 0
    this.clearTimer(m)
  }

  private clearTimer (m: ModelState): void {
    if (m.timer !== null) clearTimeout(m.timer)
    m.timer = null
  }

  /** Arms the keep-alive timer of a model that has nothing running or waiting. */
  private idle (m: ModelState): void {
    if (m.running > 0 || m.waiting.length > 0 || !m.loaded) return
    this.clearTimer(m)
    if (m.keepAliveMs < 0) { m.expiresAt = Infinity; return }
    m.expiresAt = Date.now() + m.keepAliveMs
    if (m.keepAliveMs === 0) { this.evict(m); return }
    m.timer = setTimeout(() => this.evict(m), m.keepAliveMs)
    m.timer.unref()
  }

  private evict (m: ModelState): void {
    this.clearTimer(m)
    if (!m.loaded || m.running > 0) return
    m.loaded = false
    m.expiresAt = 0
    this.link.send({ type: 'unload', modelPath: m.path })
  }

  private pump (): void {
    if (!this.link.ready) return
    for (const m of this.models.values()) {
      while (m.waiting.length > 0 && m.running < this.capacity) {
        if (!m.loaded && m.running === 0) this.makeRoom(m)
        const job = m.waiting.shift()!
        this.waitingCount--
        job.running = true
        m.running++
        this.touch(m)
        this.link.send({ type: 'run', id: job.id, job: job.spec })
      }
    }
  }

  /** Before loading `m`, unloads idle least-recently-used models beyond maxLoaded. */
  private makeRoom (m: ModelState): void {
    let loaded = 0
    for (const x of this.models.values()) if (x.loaded) loaded++
    while (loaded >= this.maxLoaded) {
      let lru: ModelState | null = null
      for (const x of this.models.values()) {
        if (x !== m && x.loaded && x.running === 0 && (lru === null || x.lastUsed < lru.lastUsed)) lru = x
      }
      if (lru === null) return
      this.evict(lru)
      loaded--
    }
  }
}
