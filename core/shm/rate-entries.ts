// A rate limit's entries as the management surfaces see them (`show table`,
// `clear table`, the config API's stick_table_entries): read by the control
// plane from the shared tables, never on the request path. Reads take no
// lock: an entry a worker changes meanwhile shows its value of a moment
// before or after, as HAProxy's `show table` does for its counters.
import { drainShare } from './cluster-limit.js'
import {
  CX_KA, CX_OTHERS, CX_WORDS, RATE_DATA_WORDS, RATE_SET_WORDS, RATE_WAYS, RD_A, RD_B, RD_EXPIRE, RD_TICK, RS_DATA, RS_KEY_A, RS_KEY_B,
} from './layout.js'
import { nameOwner, nameText } from './rate-names.js'
import { MILLI, type RateTable, windowEstimate } from './rate-table.js'

/** What a rate limit tells the surfaces about its entries (plugins/rate-limit.ts limitTable). */
export interface LimitTable {
  readonly name: string
  readonly algorithm: string
  readonly scope: 'local' | 'cluster'
  /** the RN_OWNER its entries carry */
  readonly owner: number
  /** 'window': `limit` requests per sliding `periodMs`; 'bucket': a level of `limit` requests draining at `drainPerMs` units per ms */
  readonly kind: 'window' | 'bucket'
  readonly periodMs: number
  readonly limit: number
  readonly drainPerMs: number
  /** The table key of a source as an operator writes it (an IP address, as the limit counts it: by IPv6 prefix...); null when it is not an address. */
  keyOf (source: string): { ka: number, kb: number, text: string } | null
}

export interface EntryView {
  /** global way index: the entry's "pointer" in `show table` */
  readonly way: number
  readonly ka: number
  readonly kb: number
  readonly key: string
  /** ms until the entry expires */
  readonly expMs: number
  /** window: this node's sliding-window estimate; bucket: this node's level; requests, rounded up */
  readonly count: number
  /** scope = "cluster": this node's count plus the other nodes' at the last sync (null for a local limit) */
  readonly cluster: number | null
}

/** The live entries of `lt` in `table` (the cluster table with its extras at `cx` for a cluster-scope limit). */
export function listEntries (table: RateTable, cx: number, lt: LimitTable, now: number): EntryView[] {
  const out: EntryView[] = []
  if (table.names < 0) return out
  for (let s = 0; s < table.sets; s++) {
    for (let w = 0; w < RATE_WAYS; w++) {
      const e = entryAt(table, cx, lt, s * RATE_WAYS + w, now)
      if (e !== null) out.push(e)
    }
  }
  return out
}

/** The live entry of (ka, kb) for `lt`, or null. */
export function findEntry (table: RateTable, cx: number, lt: LimitTable, ka: number, kb: number, now: number): EntryView | null {
  const set = table.setOf(kb)
  const i32 = table.i32
  for (let w = 0; w < RATE_WAYS; w++) {
    if (i32[set + RS_KEY_A + w] !== ka || i32[set + RS_KEY_B + w] !== kb) continue
    return entryAt(table, cx, lt, ((set - table.base) / RATE_SET_WORDS) * RATE_WAYS + w, now, true)
  }
  return null
}

/** The entry at global way index `way` if it is live and `lt`'s (`anyOwner`: a key already matched, named or not). */
function entryAt (table: RateTable, cx: number, lt: LimitTable, way: number, now: number, anyOwner = false): EntryView | null {
  const i32 = table.i32
  const set = table.base + Math.floor(way / RATE_WAYS) * RATE_SET_WORDS
  const w = way % RATE_WAYS
  const ka = i32[set + RS_KEY_A + w]!
  if (ka === 0) return null
  if (!anyOwner && nameOwner(i32, table.names, way) !== lt.owner) return null
  const d = set + RS_DATA + w * RATE_DATA_WORDS
  const expMs = (i32[d + RD_EXPIRE]! - now) | 0
  if (expMs <= 0) return null
  const x = cx >= 0 ? cx + way * CX_WORDS : -1
  let own: number
  if (lt.kind === 'window') {
    own = windowEstimate(i32[d + RD_TICK]!, i32[d + RD_A]!, i32[d + RD_B]!, now, lt.periodMs)
  } else {
    const drain = x >= 0 ? lt.drainPerMs * drainShare(i32, x) : lt.drainPerMs
    own = Math.max(0, i32[d + RD_A]! - Math.max(0, (now - i32[d + RD_TICK]!) | 0) * drain)
  }
  const others = x >= 0 && i32[x + CX_KA] === ka ? i32[x + CX_OTHERS]! : 0
  const asRequests = (v: number): number => lt.kind === 'window' ? v : Math.ceil(v / MILLI)
  return {
    way,
    ka,
    kb: i32[set + RS_KEY_B + w]!,
    key: table.names < 0 ? '' : nameText(i32, table.names, way),
    expMs,
    count: asRequests(own),
    cluster: x >= 0 ? asRequests(own + others) : null,
  }
}
