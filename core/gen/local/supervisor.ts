// Keeps one runner child process alive. Inference runs there, not in the
// balancer, because a model can abort its whole process (an uncaught C++
// exception in llama.cpp ends the process, worker threads included): Ollama
// runs llama.cpp in separate runner processes for the same reason.
//
// Restart policy: the first restart waits `delayMs`, each further consecutive
// crash doubles the wait up to `maxDelayMs`; a runner that stayed up for
// STABLE_MS resets the wait. A runner that does not report ready within
// START_TIMEOUT_MS is killed and counts as a crash.

import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import type { Logger } from '../../log.js'
import type { FromRunner, RunnerConf, ToRunner } from './protocol.js'

const STABLE_MS = 30_000
const START_TIMEOUT_MS = 60_000
const STOP_TIMEOUT_MS = 3_000

export interface SupervisorEvents {
  ready (): void
  messages (msgs: FromRunner[]): void
  /** The runner died (or was stopped); `reason` is the message sent to clients whose jobs it ran. */
  exit (reason: string): void
}

export class Supervisor {
  private readonly entry: string
  private readonly conf: RunnerConf
  private readonly delayMs: number
  private readonly maxDelayMs: number
  private readonly log: Logger
  private readonly events: SupervisorEvents
  private child: ChildProcess | null = null
  private isReady = false
  private closing = false
  private nextDelay: number
  private startedAt = 0
  private restartTimer: NodeJS.Timeout | null = null
  /** Set by kill(): what the jobs of the killed runner are told instead of "crashed". */
  private killReason: string | null = null
  private startTimer: NodeJS.Timeout | null = null
  /** Runner restarts after a crash, since start. */
  restarts = 0

  constructor (entry: URL, conf: RunnerConf, delayMs: number, maxDelayMs: number, log: Logger, events: SupervisorEvents) {
    this.entry = fileURLToPath(entry)
    this.conf = conf
    this.delayMs = delayMs
    this.maxDelayMs = maxDelayMs
    this.nextDelay = delayMs
    this.log = log
    this.events = events
  }

  get ready (): boolean { return this.isReady }
  get pid (): number { return this.child?.pid ?? 0 }

  start (): void {
    if (this.closing || this.child !== null) return
    // execArgv: [] so the runner does not inherit the parent's flags (--test, --inspect, ...).
    const child = fork(this.entry, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'json', execArgv: [] })
    this.child = child
    this.startedAt = Date.now()
    child.on('message', (m: unknown) => this.onMessage(child, m))
    child.on('error', (err) => this.log.error('generation runner error', { err: err.message }))
    child.on('exit', (code, signal) => this.onExit(child, code, signal))
    child.send({ type: 'init', conf: this.conf } satisfies ToRunner)
    this.startTimer = setTimeout(() => {
      this.log.error('generation runner did not start in time; killing it', { pid: child.pid })
      child.kill('SIGKILL')
    }, START_TIMEOUT_MS)
    this.startTimer.unref()
  }

  /** Sends to the runner; false when there is none (the message is dropped). */
  send (m: ToRunner): boolean {
    const c = this.child
    if (c === null || !c.connected) return false
    c.send(m)
    return true
  }

  /** Kills the runner at once (SIGKILL works on a runner stuck in native code); it is restarted as after a crash. */
  kill (reason: string): void {
    const c = this.child
    if (c === null || this.closing) return
    this.log.error('killing the generation runner', { pid: c.pid, reason })
    this.killReason = reason
    c.kill('SIGKILL')
  }

  async close (): Promise<void> {
    this.closing = true
    if (this.restartTimer !== null) clearTimeout(this.restartTimer)
    if (this.startTimer !== null) clearTimeout(this.startTimer)
    const c = this.child
    if (c === null) return
    const exited = new Promise<void>((resolve) => c.once('exit', () => resolve()))
    this.send({ type: 'shutdown' })
    const kill = setTimeout(() => c.kill('SIGKILL'), STOP_TIMEOUT_MS)
    await exited
    clearTimeout(kill)
  }

  private onMessage (child: ChildProcess, m: unknown): void {
    if (child !== this.child || !Array.isArray(m)) return
    const msgs = m as FromRunner[]
    if (!this.isReady && msgs.some((x) => x.type === 'ready')) {
      this.isReady = true
      if (this.startTimer !== null) clearTimeout(this.startTimer)
      this.startTimer = null
      this.log.info('generation runner ready', { pid: child.pid })
      this.events.ready()
    }
    this.events.messages(msgs)
  }

  private onExit (child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (child !== this.child) return
    this.child = null
    this.isReady = false
    if (this.startTimer !== null) clearTimeout(this.startTimer)
    this.startTimer = null
    const how = signal !== null ? `signal ${signal}` : `exit code ${code}`
    if (this.closing) {
      this.events.exit('the generation service is shutting down')
      return
    }
    const reason = this.killReason ?? `model runner process crashed (${how}); it is being restarted`
    if (this.killReason === null) this.log.error('generation runner died', { pid: child.pid, code, signal })
    this.killReason = null
    this.events.exit(reason)
    if (Date.now() - this.startedAt >= STABLE_MS) this.nextDelay = this.delayMs
    const delay = this.nextDelay
    this.nextDelay = Math.min(this.nextDelay * 2, this.maxDelayMs)
    this.restarts++
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null
      this.start()
    }, delay)
  }
}
