// Tells systemd what lb is doing (sd_notify(3), conf/lb.service Type=notify):
// READY=1 once every listener is bound, RELOADING=1 ... READY=1 around a
// reload, STOPPING=1 when it drains. Only when systemd set NOTIFY_SOCKET.
//
// Node has no unix datagram sockets, so the message goes through
// `systemd-notify`, run as a child (hence NotifyAccess=all in the unit).
// systemd attributes a message to a unit by the sender's cgroup, which it can
// only read while the sender lives; systemd-notify (systemd 246 and later)
// waits until the manager has processed the message (sd_notify_barrier)
// before it exits, so the message is never dropped for a sender that is
// already gone. A native addon for one sendmsg() was not worth its build.
//
// Messages go out one at a time, in order: a READY=1 may not overtake the
// RELOADING=1 sent before it.
import { spawn } from 'node:child_process'
import type { Logger } from '../log.js'

const TOOL = 'systemd-notify'

export class ServiceNotifier {
  readonly #socket: string
  readonly #log: Logger
  #queue: Promise<void> = Promise.resolve()

  /**
   * Takes NOTIFY_SOCKET out of the environment (as sd_notify's
   * unset_environment), so the processes lb starts (the generation runner)
   * do not inherit it and speak for the service.
   */
  constructor (log: Logger, env: NodeJS.ProcessEnv = process.env) {
    this.#socket = env.NOTIFY_SOCKET ?? ''
    delete env.NOTIFY_SOCKET
    this.#log = log
  }

  /** Whether a service manager listens (NOTIFY_SOCKET was set). */
  get enabled (): boolean {
    return this.#socket !== ''
  }

  /** Sends `VAR=value` assignments (READY=1, STATUS=...); resolves once systemd-notify is done. Never rejects. */
  send (...assignments: string[]): Promise<void> {
    if (this.#socket === '') return Promise.resolve()
    this.#queue = this.#queue.then(() => this.#run(assignments))
    return this.#queue
  }

  /** READY=1 and a status line; after a reload too (RELOADING=1 ends with it). */
  ready (status: string): Promise<void> {
    return this.send('READY=1', `STATUS=${status}`)
  }

  /** RELOADING=1, with the CLOCK_MONOTONIC time systemd 253's Type=notify-reload asks for (process.hrtime is that clock). */
  reloading (): Promise<void> {
    return this.send('RELOADING=1', `MONOTONIC_USEC=${process.hrtime.bigint() / 1000n}`, 'STATUS=reloading the configuration')
  }

  stopping (): Promise<void> {
    return this.send('STOPPING=1', 'STATUS=draining requests in flight')
  }

  #run (assignments: string[]): Promise<void> {
    return new Promise((resolve) => {
      const child = spawn(TOOL, assignments, { env: { ...process.env, NOTIFY_SOCKET: this.#socket }, stdio: ['ignore', 'ignore', 'pipe'] })
      let err = ''
      child.stderr!.on('data', (d: Buffer) => { if (err.length < 1000) err += d.toString() })
      child.once('error', (e) => {
        this.#fail(assignments, (e as NodeJS.ErrnoException).code === 'ENOENT' ? `${TOOL} is not on the PATH (it comes with systemd)` : e.message)
        resolve()
      })
      child.once('close', (code, signal) => {
        if (code !== 0 && code !== null) this.#fail(assignments, `${TOOL} exited with ${code}: ${err.trim()}`)
        else if (signal !== null) this.#fail(assignments, `${TOOL} was killed by ${signal}`)
        resolve()
      })
    })
  }

  #fail (assignments: string[], reason: string): void {
    this.#log.warn('cannot notify the service manager (NOTIFY_SOCKET is set; under Type=notify systemd waits for READY=1 until its start time-out)', { message: assignments[0], socket: this.#socket, error: reason })
  }
}
