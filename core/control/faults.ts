// Control-plane faults: an exception in a management handler, a health check,
// a reload or any other control-plane task must never end the
// process (the data plane lives in its workers and must keep serving). Every
// such exception comes here: it is logged with its stack and counted in shared
// memory (H_FAULTS, /metrics lb_control_plane_errors_total). The process-wide
// handlers installed by catchStrays are the net under everything else; the
// call sites that can answer (an HTTP request) or carry on (a timer loop) catch
// first and report here themselves.
import type { Logger } from '../log.js'
import { type Shm, H_FAULTS } from '../shm/layout.js'

let shm: Shm | null = null
let log: Logger | null = null

/** Where faults are counted and logged (the control plane, once, at start). */
export function initFaults (s: Shm, l: Logger): void {
  shm = s
  log = l
}

/** Logs `err` with its stack and `where` it happened, and counts it. */
export function reportFault (where: string, err: unknown, fields: Record<string, unknown> = {}): void {
  if (shm !== null) Atomics.add(shm.i32, H_FAULTS, 1)
  const stack = err instanceof Error ? err.stack ?? err.message : String(err)
  if (log !== null) log.error('control-plane error (the process carries on)', { where, ...fields, error: stack })
  else process.stderr.write(`lb: control-plane error in ${where}: ${stack}\n`)
}

/** Runs `fn`, reporting (not throwing) what it throws. */
export function guarded (where: string, fn: () => void): void {
  try {
    fn()
  } catch (err) {
    reportFault(where, err)
  }
}

/**
 * Process-wide net: an exception or rejection nothing else caught is reported
 * and the process carries on instead of exiting. Installed once start-up is
 * over (a start-up failure still exits 1).
 */
export function catchStrays (): void {
  process.on('uncaughtException', (err) => reportFault('uncaught exception', err))
  process.on('unhandledRejection', (reason) => reportFault('unhandled rejection', reason))
}
