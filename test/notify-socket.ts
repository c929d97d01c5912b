// systemd's notification socket, played by test/fixtures/notify-socket.py (a
// unix datagram listener: Node has none): what lb sends with sd_notify(3)
// arrives here as it would at systemd, through the real systemd-notify.
import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { ROOT, waitFor } from './helpers.js'

export interface NotifyMessage {
  /** the message's assignments, in order ("READY=1", "STATUS=...") */
  readonly message: string[]
  /** for a READY=1 message: each target connected to at the moment it arrived, "ok" or the error */
  readonly probes?: Record<string, string>
}

export interface NotifySocket {
  readonly path: string
  readonly proc: ChildProcess
  /** the messages received so far, in order */
  readonly messages: NotifyMessage[]
  /** waits for the `n`th message (1-based) holding `assignment` and returns it */
  next (assignment: string, n?: number, ms?: number): Promise<NotifyMessage>
}

/**
 * Listens at `path` (mode 0666); on READY=1 the listener connects to every
 * target (`tcp:HOST:PORT`, `unix:PATH`) before it reads on. Stopped after the test.
 */
export async function startNotifySocket (t: TestContext, path: string, targets: string[] = []): Promise<NotifySocket> {
  const proc = spawn('python3', ['-u', join(ROOT, 'test', 'fixtures', 'notify-socket.py'), path, ...targets], { stdio: ['ignore', 'pipe', 'pipe'] })
  t.after(() => { proc.kill('SIGKILL') })
  const messages: NotifyMessage[] = []
  let listening = false
  let out = ''
  let err = ''
  proc.stderr!.on('data', (d: Buffer) => { err += d.toString() })
  proc.stdout!.on('data', (d: Buffer) => {
    out += d.toString()
    let nl: number
    while ((nl = out.indexOf('\n')) >= 0) {
      const o = JSON.parse(out.slice(0, nl)) as NotifyMessage & { listening?: string }
      out = out.slice(nl + 1)
      if (o.listening !== undefined) listening = true
      else messages.push(o)
    }
  })
  const alive = (): void => {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`the notify socket exited: ${err}`)
  }
  await waitFor(() => { alive(); return listening }, 'the notify socket to listen', 10_000)
  return {
    path,
    proc,
    messages,
    next: (assignment, n = 1, ms = 20_000) => waitFor(() => {
      alive()
      return messages.filter((m) => m.message.includes(assignment))[n - 1]
    }, `message ${n} with ${assignment} on the notify socket (so far: ${JSON.stringify(messages)})`, ms),
  }
}
