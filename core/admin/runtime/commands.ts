// Runtime socket commands as a table, HAProxy style: { words, usage, handler }.
// `help` and the unknown-command reply are generated from the table. Server
// commands write the shared-memory words (S_ADMIN, S_WEIGHT) and bump the
// service's state version, so every worker's balancer sees the change at its
// next pick; the slots keep these words across reloads, so changes survive one
// (core/control/slots.ts resets the weight only when the config's weight for
// that server changes, and the admin state only when its maintenance flag does).
import type { ServerConf, ServiceConf } from '../../config/dynamic.js'
import { ADMIN_MAINT, ADMIN_READY, ADMIN_STATES, S_WEIGHT, serverBase } from '../../shm/layout.js'
import { bumpServiceState, setAdminState } from '../../shm/server-state.js'
import type { AdminContext } from '../context.js'
import { ALL_STATS, type StatFilter, showInfo, showServersState, showStat } from './haproxy-stats.js'
import { showSess } from './show-sess.js'
import { showCluster } from './show-cluster.js'
import { showModels } from './show-models.js'
import { clearTable, showTable } from './show-table.js'

/** Output lines of one command, without the terminating empty line (commands never print an empty line). */
export type Output = string[]

export interface Command {
  readonly words: readonly string[]
  /** "<words and arguments>" part of the help line */
  readonly usage: string
  readonly help: string
  readonly mutates: boolean
  readonly handler: (ctx: AdminContext, args: readonly string[]) => Output | Promise<Output>
}

interface Target { readonly svc: ServiceConf, readonly srv: ServerConf, readonly slot: number, readonly serviceSlot: number }

/** Resolves "backend/server" (either part may be "#<id>"); a string is HAProxy's error message. */
function target (ctx: AdminContext, arg: string | undefined): Target | string {
  if (arg === undefined || !arg.includes('/')) return "Require 'backend/server'."
  const [b, s] = [arg.slice(0, arg.indexOf('/')), arg.slice(arg.indexOf('/') + 1)]
  const config = ctx.config()
  const svc = config.services.find((x, i) => x.kind === 'proxy' && (x.name === b || `#${config.entrypoints.length + i + 1}` === b))
  if (svc === undefined) return 'No such backend.'
  const srv = svc.servers.find((x, i) => x.name === s || `#${i + 1}` === s)
  if (srv === undefined) return 'No such server.'
  const slot = ctx.slots.server(svc.name, srv.name)
  const serviceSlot = ctx.slots.service(svc.name)
  if (slot === undefined || serviceSlot === undefined) return 'No such server.'
  return { svc, srv, slot, serviceSlot }
}

function setAdmin (ctx: AdminContext, t: Target, state: number): void {
  setAdminState(ctx.shm.i32, t.slot, t.serviceSlot, state)
  ctx.log.info('runtime: server state changed', { service: t.svc.name, server: t.srv.name, state: ADMIN_STATES[state] })
}

/** HAProxy's weight syntax: absolute 0..256, or "N%" of the initial (config) weight, capped at 256. */
function setWeight (ctx: AdminContext, t: Target, value: string | undefined): Output {
  if (value === undefined || value === '') return ['Require <weight> or <weight%>.']
  let w: number
  if (value.endsWith('%')) {
    const pct = Number(value.slice(0, -1))
    if (!/^\d+%$/.test(value)) return ['Relative weight must be positive.']
    w = Math.min(256, Math.floor((t.srv.weight * pct) / 100)) // integer division, as HAProxy: 50% of 1 is 0
  } else {
    if (!/^\d+$/.test(value) || Number(value) > 256) return ['Absolute weight can only be between 0 and 256 inclusive.']
    w = Number(value)
  }
  Atomics.store(ctx.shm.i32, serverBase(t.slot) + S_WEIGHT, w)
  bumpServiceState(ctx.shm.i32, t.serviceSlot)
  ctx.log.info('runtime: server weight changed', { service: t.svc.name, server: t.srv.name, weight: w })
  return []
}

const onServer = (fn: (ctx: AdminContext, t: Target, args: readonly string[]) => Output) =>
  (ctx: AdminContext, args: readonly string[]): Output => {
    const t = target(ctx, args[0])
    return typeof t === 'string' ? [t] : fn(ctx, t, args.slice(1))
  }

function statFilter (args: readonly string[]): StatFilter {
  const opts = args.filter((a) => a === 'up' || a === 'no-maint')
  const pos = args.filter((a) => !['up', 'no-maint', 'typed', 'json', 'desc'].includes(a))
  return {
    ...ALL_STATS,
    proxy: pos[0] !== undefined && pos[0] !== '-1' ? pos[0] : null,
    types: pos[1] !== undefined ? Number(pos[1]) || -1 : -1,
    sid: pos[2] !== undefined ? Number(pos[2]) || -1 : -1,
    up: opts.includes('up'),
    noMaint: opts.includes('no-maint'),
  }
}

export const COMMANDS: readonly Command[] = [
  {
    words: ['show', 'info'], usage: 'show info', help: 'report information about the running process', mutates: false,
    handler: (ctx) => showInfo(ctx),
  },
  {
    words: ['show', 'stat'], usage: 'show stat [<iid|proxy> <type> <sid>] [up|no-maint]', help: 'report counters for each proxy and server', mutates: false,
    handler: (ctx, args) => showStat(ctx, statFilter(args)),
  },
  {
    words: ['show', 'sess'], usage: 'show sess', help: 'report the list of current client connections', mutates: false,
    handler: (ctx) => showSess(ctx),
  },
  {
    words: ['show', 'cluster'], usage: 'show cluster', help: 'report this node, the live nodes of the cluster, Redis health and the last sync', mutates: false,
    handler: (ctx) => showCluster(ctx),
  },
  {
    words: ['show', 'models'], usage: 'show models', help: 'report each model server\'s models: loaded, in flight, requests, tokens', mutates: false,
    handler: (ctx) => showModels(ctx),
  },
  {
    words: ['show', 'table'], usage: 'show table [<table> [<filter>]*]', help: 'report table usage stats or dump a rate limit\'s entries (filter: data/key)', mutates: false,
    handler: (ctx, args) => showTable(ctx, args),
  },
  {
    words: ['clear', 'table'], usage: 'clear table <table> [<filter>]*', help: 'remove an entry from a rate limit\'s table (filter: data/key)', mutates: true,
    handler: (ctx, args) => clearTable(ctx, args),
  },
  {
    words: ['show', 'servers', 'state'], usage: 'show servers state [<backend>]', help: 'dump volatile server information for all known backends', mutates: false,
    handler: (ctx, args) => showServersState(ctx, args[0] ?? null) ?? ["Can't find backend."],
  },
  {
    words: ['set', 'server'], usage: 'set server <bk>/<srv> [state|weight] <value>', help: 'change a server\'s state (ready|drain|maint) or weight', mutates: true,
    handler: onServer((ctx, t, args) => {
      if (args[0] === 'state') {
        const state = (ADMIN_STATES as readonly string[]).indexOf(args[1] ?? '')
        if (state < 0) return ["'set server <srv> state' expects 'ready', 'drain' and 'maint'."]
        setAdmin(ctx, t, state)
        return []
      }
      if (args[0] === 'weight') return setWeight(ctx, t, args[1])
      return ['usage: set server <backend>/<server> state|weight <value>']
    }),
  },
  {
    words: ['disable', 'server'], usage: 'disable server (DEPRECATED)', help: "disable a server for maintenance (use 'set server' instead)", mutates: true,
    handler: onServer((ctx, t) => { setAdmin(ctx, t, ADMIN_MAINT); return [] }),
  },
  {
    words: ['enable', 'server'], usage: 'enable server  (DEPRECATED)', help: "enable a disabled server (use 'set server' instead)", mutates: true,
    handler: onServer((ctx, t) => { setAdmin(ctx, t, ADMIN_READY); return [] }),
  },
  {
    words: ['set', 'weight'], usage: 'set weight <bk>/<srv>  (DEPRECATED)', help: "change a server's weight (use 'set server' instead)", mutates: true,
    handler: onServer((ctx, t, args) => setWeight(ctx, t, args[0])),
  },
  {
    words: ['get', 'weight'], usage: 'get weight <bk>/<srv>', help: 'report a server\'s current weight', mutates: false,
    handler: onServer((ctx, t) => [`${Atomics.load(ctx.shm.i32, serverBase(t.slot) + S_WEIGHT)} (initial ${t.srv.weight})`]),
  },
]

const ALWAYS = [
  '  help [<command>]                        : list matching or all commands',
  '  prompt [help]                           : toggle interactive mode with prompt',
  '  quit                                    : disconnect',
]

function usageLine (c: Command): string {
  return `  ${c.usage.padEnd(40)}: ${c.help}`
}

/** `help [words]`, or the unknown-command reply (HAProxy's cli_gen_usage_msg). */
export function usage (args: readonly string[], isHelp: boolean): Output {
  let length = 0
  for (const c of COMMANDS) {
    let i = 0
    while (i < c.words.length && i < args.length && c.words[i] === args[i]) i++
    length = Math.max(length, i)
  }
  const shown = COMMANDS.filter((c) => c.words.slice(0, length).every((w, i) => args[i] === w)).sort((a, b) => (a.usage < b.usage ? -1 : 1))
  let head: string
  if (isHelp) head = 'The following commands are valid at this level:'
  else if (args.length === 0) head = 'Unknown command. Please enter one of the following commands only:'
  else if (length === 0) head = `Unknown command: '${args.join(' ')}'. Please enter one of the following commands only:`
  else head = `Unknown command: '${args.join(' ')}', but maybe one of the following ones is a better match:`
  return [head, ...shown.map(usageLine), ...ALWAYS]
}

/** The command whose words all match the start of `args`, longest first. */
export function find (args: readonly string[]): Command | null {
  let best: Command | null = null
  for (const c of COMMANDS) {
    if (c.words.every((w, i) => args[i] === w) && (best === null || c.words.length > best.words.length)) best = c
  }
  return best
}
