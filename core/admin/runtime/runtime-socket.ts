// The runtime socket: a unix stream socket (mode 0600) speaking HAProxy's CLI
// text protocol. By default a connection carries one line, which may hold
// several commands separated by ';' (escape with '\'); each command's output
// ends with one empty line, and the connection closes after the line.
// `prompt` switches to interactive mode ("> " after each reply), `prompt i`
// interactive without a prompt, `prompt n` back to one-shot, `quit` closes.
// End of input (the client half-closes, as `echo cmd | socat ...` does) runs
// what was received, a last line without its newline included, and closes only
// after every reply is written: the socket is half-open, so replies that finish
// later (show sess asks every worker) still reach the client, as with HAProxy.
import { chmodSync, mkdirSync, unlinkSync } from 'node:fs'
import net from 'node:net'
import { dirname } from 'node:path'
import { lbError } from '../../errors.js'
import { type Output, find, usage } from './commands.js'
import type { AdminContext } from '../context.js'
import { reportFault } from '../../control/faults.js'

const MAX_LINE = 64 * 1024
/** open connections per server, so closing does not wait for idle interactive sessions */
const SOCKETS = new WeakMap<net.Server, Set<net.Socket>>()

/** Splits a line into commands on unescaped ';', and each command into words on unescaped blanks. */
export function parseLine (line: string): string[][] {
  const cmds: string[][] = []
  let words: string[] = []
  let word = ''
  let inWord = false
  const endWord = (): void => { if (inWord) words.push(word); word = ''; inWord = false }
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!
    if (ch === '\\' && i + 1 < line.length) {
      word += line[++i]
      inWord = true
    } else if (ch === ';') {
      endWord()
      cmds.push(words)
      words = []
    } else if (ch === ' ' || ch === '\t' || ch === '\r') {
      endWord()
    } else {
      word += ch
      inWord = true
    }
  }
  endWord()
  cmds.push(words)
  return cmds
}

type Mode = 'once' | 'interactive' | 'prompt'

class Session {
  readonly #ctx: AdminContext
  readonly #sock: net.Socket
  #mode: Mode = 'once'
  #buf = ''
  #busy: Promise<void> = Promise.resolve()
  #closed = false

  /** `ready`: commands wait for it (lb is ready); the connection is accepted meanwhile */
  constructor (ctx: AdminContext, sock: net.Socket, ready: Promise<void>) {
    this.#ctx = ctx
    this.#sock = sock
    this.#busy = ready
    sock.setEncoding('utf8')
    sock.on('data', (d: string) => this.#onData(d))
    sock.on('end', () => this.#onEnd())
    sock.on('error', () => { this.#closed = true })
    sock.on('close', () => { this.#closed = true })
  }

  #onData (d: string): void {
    this.#buf += d
    if (this.#buf.length > MAX_LINE && !this.#buf.includes('\n')) {
      this.#sock.destroy()
      return
    }
    let nl: number
    while ((nl = this.#buf.indexOf('\n')) >= 0) {
      const line = this.#buf.slice(0, nl)
      this.#buf = this.#buf.slice(nl + 1)
      this.#busy = this.#busy.then(() => this.#line(line))
    }
  }

  #onEnd (): void {
    const rest = this.#buf
    this.#buf = ''
    if (rest.trim() !== '') this.#busy = this.#busy.then(() => this.#line(rest))
    this.#busy = this.#busy.then(() => {
      if (this.#closed) return
      this.#closed = true
      this.#sock.end()
    })
  }

  async #line (line: string): Promise<void> {
    if (this.#closed) return
    if (line.trim() === '' && this.#mode === 'once') {
      // as HAProxy: an empty command line is an unknown command, answered with the usage
      this.#reply(usage([], false))
      this.#sock.end()
      this.#closed = true
      return
    }
    for (const args of parseLine(line)) {
      if (this.#closed) return
      if (args.length === 0) {
        if (this.#mode !== 'once') this.#write(this.#mode === 'prompt' ? '> ' : '')
        continue
      }
      if (args[0] === 'quit') {
        this.#sock.end()
        this.#closed = true
        return
      }
      if (args[0] === 'prompt') {
        const m = args[1]
        this.#mode = m === 'n' ? 'once' : m === 'i' ? 'interactive' : m === 'p' ? 'prompt' : this.#mode === 'once' ? 'prompt' : 'once'
        this.#reply([])
        continue
      }
      this.#reply(await this.#run(args))
    }
    if (this.#mode === 'once') {
      this.#sock.end()
      this.#closed = true
    }
  }

  async #run (args: string[]): Promise<Output> {
    if (args[0] === 'help') return usage(args.slice(1), true)
    const cmd = find(args)
    if (cmd === null) return usage(args, false)
    try {
      if (cmd.mutates) this.#ctx.log.info('runtime socket command', { command: args.join(' ') })
      return await cmd.handler(this.#ctx, args.slice(cmd.words.length))
    } catch (err) {
      reportFault('runtime socket command', err, { command: args.join(' ') })
      return [`Internal error: ${(err as Error).message}`]
    }
  }

  /** Output lines, then the empty line that ends every reply, then the prompt when in prompt mode. */
  #reply (out: Output): void {
    const body = out.length === 0 ? '' : out.join('\n') + '\n'
    this.#write(body + '\n' + (this.#mode === 'prompt' ? '> ' : ''))
  }

  #write (s: string): void {
    if (!this.#closed && s !== '') this.#sock.write(s)
  }
}

/** Listens on `path`; a stale socket file is replaced, a live one (another process) is an error. Commands wait for `ready`. */
export async function startRuntimeSocket (ctx: AdminContext, path: string, ready: Promise<void> = Promise.resolve()): Promise<net.Server> {
  const open = new Set<net.Socket>()
  mkdirSync(dirname(path), { recursive: true })
  const alive = await new Promise<boolean>((resolve) => {
    const c = net.connect(path)
    c.once('connect', () => { c.destroy(); resolve(true) })
    c.once('error', () => resolve(false))
  })
  if (alive) throw lbError('LB_ERR_ADMIN_LISTEN', { address: path, surface: 'runtime socket', reason: 'another process is listening on it' })
  try { unlinkSync(path) } catch { /* none */ }
  // allowHalfOpen: the client's end of input must not end our side before the replies are out
  const server = net.createServer({ allowHalfOpen: true }, (sock) => {
    open.add(sock)
    sock.on('close', () => open.delete(sock))
    return new Session(ctx, sock, ready)
  })
  SOCKETS.set(server, open)
  // the socket is created with the process umask: narrow it so the file never exists with wider permissions
  const old = process.umask(0o177)
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(path, () => { server.off('error', reject); resolve() })
    })
  } catch (err) {
    throw lbError('LB_ERR_ADMIN_LISTEN', { address: path, surface: 'runtime socket', reason: (err as Error).message })
  } finally {
    process.umask(old)
  }
  chmodSync(path, 0o600)
  return server
}

export function closeRuntimeSocket (server: net.Server, path: string): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => {
      try { unlinkSync(path) } catch { /* already gone */ }
      resolve()
    })
    for (const s of SOCKETS.get(server) ?? []) s.destroy()
  })
}
