#!/usr/bin/env node
// lb run -c FILE     start the balancer (foreground; systemd runs it so)
// lb check -c FILE   validate the configuration and exit 0 or 1 (like nginx -t)
import { loadConfigAsync } from './configure.js'
import { createLogger } from './log.js'
import { unwritablePaths } from './config/paths.js'
import { formatError, isLbError } from './errors.js'
import { run } from './main.js'
import { catchStrays } from './control/faults.js'

const USAGE = `usage: lb run [-c FILE]     start the balancer (default config conf/lb.toml)
       lb check [-c FILE]   validate the configuration and exit
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
