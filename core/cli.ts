#!/usr/bin/env node
// lb run -c FILE     start the balancer (foreground; systemd runs it so)
// lb check -c FILE   validate the configuration and exit 0 or 1 (like nginx -t)
// lb hash-token      make an API key for [[generation.keys]] (or hash one read from stdin)
import { loadConfigAsync } from './configure.js'
import { createLogger } from './log.js'
import { unwritablePaths } from './config/paths.js'
import { formatError, isLbError } from './errors.js'
import { run } from './main.js'
import { catchStrays } from './control/faults.js'
import { randomBytes } from 'node:crypto'
import { tokenHash } from './auth/token-digest.js'

const USAGE = `usage: lb run [-c FILE]     start the balancer (default config conf/lb.toml)
       lb check [-c FILE]   validate the configuration and exit
       lb hash-token [-]    print a new API key and its hash for [[generation.keys]] hash
                            (with -: the hash of the key read from stdin; a key never goes on a command line)
       lb version`

function configArg (args: string[]): string {
  const i = args.findIndex((a) => a === '-c' || a === '--config')
  if (i < 0) return 'conf/lb.toml'
  const v = args[i + 1]
  if (v === undefined) {
    process.stderr.write(`lb: ${args[i]} needs a file\n${USAGE}\n`)
    process.exit(2)
  }
  return v
}

async function main (): Promise<void> {
  const [cmd, ...args] = process.argv.slice(2)
  switch (cmd) {
    case 'check': {
      const file = configArg(args)
      try {
        const problems = unwritablePaths(await loadConfigAsync(file))
        if (problems.length > 0) throw new Error(problems.join('\n'))
        process.stdout.write(`lb: configuration file ${file} test is successful\n`)
      } catch (err) {
        process.stderr.write(`lb: ${(err as Error).message}\nlb: configuration file ${file} test failed\n`)
        process.exit(1)
      }
      return
    }
    case 'run': {
      // for start-up failures only: run() logs at the config's log level
      const log = createLogger('info')
      // SIGHUP's default action kills the process: take it before start-up (which logs
      // "ready" before run() returns), and apply one that came early once running
      let reload: (() => Promise<void>) | null = null
      let early = false
      process.on('SIGHUP', () => {
        if (reload !== null) void reload()
        else early = true
      })
      try {
        const lb = await run(configArg(args))
        catchStrays() // from now on nothing in the control plane ends the process (core/control/faults.ts)
        reload = () => lb.reload()
        if (early) void lb.reload()
        const stop = (): void => { lb.stop().then(() => process.exit(0), () => process.exit(1)) }
        process.on('SIGTERM', stop)
        process.on('SIGINT', stop)
      } catch (err) {
        // one line, never a stack trace: the message names the path or address and the fix
        if (isLbError(err)) log.error(err.message, { code: err.code })
        else log.error(formatError('LB_ERR_STARTUP', { reason: (err as Error).message ?? String(err) }), { code: 'LB_ERR_STARTUP' })
        process.exit(1)
      }
      return
    }
    case 'hash-token': {
      if (args[0] === '-') {
        const chunks: Buffer[] = []
        for await (const c of process.stdin) chunks.push(c as Buffer)
        const key = Buffer.concat(chunks).toString('utf8').trim()
        if (key.length < 16) {
          process.stderr.write('lb: a key of at least 16 characters is expected on stdin\n')
          process.exit(2)
        }
        process.stdout.write(`${tokenHash(key)}\n`)
        return
      }
      // 32 random bytes: a key nobody guesses, in characters a header and a shell take as they are
      const key = 'lb-' + randomBytes(32).toString('base64url')
      process.stdout.write(`key:  ${key}\nhash: ${tokenHash(key)}\n`)
      return
    }
    case 'version':
    case '--version':
      process.stdout.write('lb 0.1.0\n')
      return
    default:
      process.stderr.write(`${USAGE}\n`)
      process.exit(cmd === undefined || cmd === 'help' || cmd === '--help' ? 0 : 2)
  }
}

void main()
