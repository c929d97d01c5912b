// `show table` and `clear table` on the runtime socket, in HAProxy's forms and
// words (its management guide, and the messages of src/stick_table.c):
//
//   show table                                   one header line per rate limit
//   show table <limit> [data.<type> <op> <v>]*   header, then its entries, highest count first
//   show table <limit> key <address>             header and that source's entry (nothing when absent)
//   clear table <limit> [data.<type> <op> <v>]*  forgets the matching entries (all without a filter)
//   clear table <limit> key <address>            forgets one source; cluster scope: on every node
//
// An entry line is HAProxy's: `0x<way>: key=<source> use=0 exp=<ms> <type>=<value>...`.
// `use` is always 0 (lb keeps no reference to an entry between requests).
import type { AdminContext } from '../context.js'
import { type Filter, type StickTable, clearSource, entries, entryOf, fields, findStickTable, keyOf, parseFilter, stickTables, used } from '../rate-tables.js'
import type { EntryView } from '../../shm/rate-entries.js'

function header (t: StickTable, n = used(t)): string {
  return `# table: ${t.lt.name}, type: ip, size:${t.size}, used:${n}`
}

function line (t: StickTable, e: EntryView): string {
  const data = fields(t).map((f) => ` ${f.label}=${f.read(e)}`).join('')
  return `0x${e.way.toString(16)}: key=${e.key} use=0 exp=${e.expMs}${data}`
}

/** The filters of args[from...] (`data.<type> <op> <value>`, repeated); a string is the error to print. */
function filters (t: StickTable, args: readonly string[], from: number, usage: string): Filter[] | string {
  const out: Filter[] = []
  for (let i = from; i < args.length; i += 3) {
    if (!args[i]!.startsWith('data.')) return usage
    const f = parseFilter(t, args[i]!.slice(5), args[i + 1], args[i + 2])
    if (typeof f === 'string') return f
    out.push(f)
  }
  return out
}

const SHOW_USAGE = 'Optional argument only supports "data.<store_data_type>" <operator> <value> and key <key>'
const CLEAR_USAGE = 'Required arguments: <table> "data.<store_data_type>" <operator> <value> or <table> key <key>'

export function showTable (ctx: AdminContext, args: readonly string[]): string[] {
  if (args.length === 0) return stickTables(ctx).map((t) => header(t))
  const t = findStickTable(ctx, args[0]!)
  if (t === null) return ['No such table']
  if (args[1] === 'key') {
    if (args[2] === undefined) return ['Key value expected']
    const e = entryOf(t, args[2])
    if (e === 'invalid') return ['Invalid key']
    return e === null ? [] : [header(t), line(t, e)]
  }
  const f = filters(t, args, 1, SHOW_USAGE)
  if (typeof f === 'string') return [f]
  const list = entries(t, f)
  // the header counts every entry of the limit, as HAProxy's `used` (the list may be filtered)
  return [header(t, f.length === 0 ? list.length : used(t)), ...list.map((e) => line(t, e))]
}

export async function clearTable (ctx: AdminContext, args: readonly string[]): Promise<string[]> {
  if (args.length === 0) return [CLEAR_USAGE]
  const t = findStickTable(ctx, args[0]!)
  if (t === null) return ['No such table']
  let keys: Array<{ ka: number, kb: number }>
  if (args[1] === 'key') {
    if (args[2] === undefined) return ['Key value expected']
    const k = keyOf(t, args[2])
    if (k === null) return ['Invalid key']
    // cluster scope: other nodes may count the source even when this one never saw it
    keys = [k]
  } else {
    const f = filters(t, args, 1, CLEAR_USAGE)
    if (typeof f === 'string') return [f]
    keys = entries(t, f)
  }
  let failed: string | null = null
  for (const k of keys) failed = (await clearSource(ctx, t, k.ka, k.kb)) ?? failed
  if (failed !== null) return [`Cleared on this node only: Redis did not answer (${failed}); the other nodes keep their counts until the entries expire.`]
  return []
}
