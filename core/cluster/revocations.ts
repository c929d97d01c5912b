// Session revocations shared by the nodes of a cluster (docs/cluster.md,
// "Session revocations"). A revocation a worker made (a logout) reaches every
// other node before its request is answered:
//
//   1. one script call stores it in Redis (<prefix>revoked, a sorted set of
//      "<key hex>:<at>" scored by its end, so Redis drops what is over) and
//      announces it on <prefix>revoked with the next sequence number;
//   2. every other node writes it into its shared table (its workers refuse
//      the session from then on) and acknowledges on <prefix>revoked-ack;
//   3. this node waits for the acknowledgements of the live nodes (the
//      membership), at most ACK_MS; a node that does not answer gets it at its
//      next poll.
//
// Nothing is lost to a missed message: every POLL_MS a node reads the
// sequence, and when it is ahead of the last one the node saw (for a whole
// poll), it reads every entry again. A node that starts (or comes back) seeds
// Redis with the entries it kept (its revocation file), then reads them all,
// before its workers start: a session revoked while it was down is refused by
// it from its first request. A Redis that lost its data (its sequence went
// back) is seeded again by every node. While Redis is unreachable a node's own
// revocations wait and are sent when it answers again.
import type { ClusterConf } from '../config/cluster.js'
import type { RevocationHub, RevocationShare } from '../control/revocations.js'
import type { Logger } from '../log.js'
import { type Revocation, keyHex, parseKeyHex, unixNow } from '../shm/revocations.js'
import type { RedisHealth } from './health.js'
import { type Redis, endOnAuthRefusal } from './redis.js'
import { REVOKE, REVOKE_EPOCH, REVOKE_SEED, runScript } from './scripts.js'

/** a revocation is announced; the live nodes' acknowledgements are awaited this long at most, ms */
export const ACK_MS = 1000
/** the sequence is read this often, ms */
export const POLL_MS = 1000
/** entries per ZSCAN page and per seeding script call */
const BATCH = 500

export class RevocationSync implements RevocationShare {
  readonly #redis: Redis
  readonly #conf: ClusterConf
  readonly #health: RedisHealth
  readonly #log: Logger
  readonly #hub: RevocationHub
  readonly #nodes: () => readonly string[]
  readonly #key: string
  readonly #seqKey: string
  readonly #epochKey: string
  readonly #channel: string
  readonly #ackChannel: string
  #sub: Redis | null = null
  #timer: NodeJS.Timeout | null = null
  /** the highest sequence number this node has seen (announced or read) */
  #last = 0
  /** a sequence ahead of #last seen at a poll: read everything when #last has not reached it by the next */
  #behind = 0
  #polling = false
  /** Redis did not take these (it was unreachable): sent at the next poll */
  #pending: Revocation[] = []
  #pendingEpoch = 0
  /** seed Redis with this node's entries at the next poll (it could not at start) */
  #seed = false
  #count = 0
  readonly #acks = new Map<string, { waiting: Set<string>, done: () => void }>()

  constructor (redis: Redis, conf: ClusterConf, health: RedisHealth, log: Logger, hub: RevocationHub, nodes: () => readonly string[]) {
    this.#redis = redis
    this.#conf = conf
    this.#health = health
    this.#log = log
    this.#hub = hub
    this.#nodes = nodes
    this.#key = conf.prefix + 'revoked'
    this.#seqKey = conf.prefix + 'revoked-seq'
    this.#epochKey = conf.prefix + 'revoked-epoch'
    this.#channel = conf.prefix + 'revoked'
    this.#ackChannel = conf.prefix + 'revoked-ack'
  }

  /** Subscribes, seeds Redis with this node's entries and reads the cluster's; each step bounded (Redis may be down). */
  async start (): Promise<void> {
    // a subscribed connection can issue nothing else: its own, with the same bounds
    const sub = this.#redis.duplicate()
    this.#sub = sub
    sub.on('error', () => {})
    endOnAuthRefusal(sub)
    sub.on('message', (channel: string, text: string) => {
      if (channel === this.#channel) this.#announced(text)
      else this.#acked(text)
    })
    // (re)subscribes after every reconnect; a first connect that failed is covered too
    sub.on('ready', () => { sub.subscribe(this.#channel, this.#ackChannel).catch(() => {}) })
    await sub.connect().catch(() => {})
    if (sub.status === 'ready') await sub.subscribe(this.#channel, this.#ackChannel).catch(() => {})
    const sent = performance.now() // a failure counts once per stall (health.ts)
    try {
      await this.#seedRedis()
      await this.#readAll()
    } catch (err) {
      this.#seed = true
      this.#health.failed(err as Error, sent)
    }
    this.#hub.share = this
    this.#timer = setInterval(() => { void this.#poll() }, POLL_MS)
    this.#timer.unref()
  }

  close (): void {
    if (this.#timer !== null) clearInterval(this.#timer)
    this.#timer = null
    this.#hub.share = null
    this.#sub?.disconnect()
    for (const a of this.#acks.values()) a.done()
  }

  async publish (r: Revocation): Promise<void> {
    const id = `${this.#conf.node}:${++this.#count}`
    const others = this.#nodes().filter((n) => n !== this.#conf.node)
    const acked = this.#awaitAcks(id, others)
    if (!await this.#send(r, id)) {
      this.#pending.push(r)
      this.#acks.get(id)?.done()
      return
    }
    const missing = await acked
    if (missing.length > 0) this.#log.warn('session revocation not acknowledged in time; those nodes read it at their next poll', { nodes: missing, waited_ms: ACK_MS, poll_ms: POLL_MS })
  }

  async publishEpoch (epoch: number): Promise<void> {
    const sent = performance.now() // a failure counts once per stall (health.ts)
    try {
      await runScript(this.#redis, REVOKE_EPOCH, [this.#epochKey, this.#seqKey], [epoch, this.#channel, ` ${this.#conf.node}:e ${this.#conf.node} e ${epoch}`])
      this.#health.ok()
    } catch (err) {
      this.#pendingEpoch = Math.max(this.#pendingEpoch, epoch)
      this.#health.failed(err as Error, sent)
    }
  }

  /** true once Redis has it (and has announced it) */
  async #send (r: Revocation, id: string): Promise<boolean> {
    const hex = keyHex(r.ka, r.kb)
    const sent = performance.now() // a failure counts once per stall (health.ts)
    try {
      await runScript(this.#redis, REVOKE, [this.#key, this.#seqKey], [`${hex}:${r.at}`, r.exp, this.#channel, ` ${id} ${this.#conf.node} r ${hex} ${r.at} ${r.exp}`])
      this.#health.ok()
      return true
    } catch (err) {
      this.#health.failed(err as Error, sent)
      return false
    }
  }

  /** Resolves with the nodes among `nodes` that did not acknowledge `id` within ACK_MS (registered before the announcement: an answer cannot come first). */
  #awaitAcks (id: string, nodes: readonly string[]): Promise<string[]> {
    if (nodes.length === 0) return Promise.resolve([])
    const waiting = new Set(nodes)
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        this.#acks.delete(id)
        resolve([...waiting])
      }
      const timer = setTimeout(done, ACK_MS)
      this.#acks.set(id, { waiting, done })
    })
  }

  /** "<seq> <id> <node> r <key hex> <at> <exp>" or "<seq> <id> <node> e <epoch>" */
  #announced (text: string): void {
    const f = text.split(' ')
    const seq = Number(f[0])
    const node = f[2] ?? ''
    if (Number.isInteger(seq) && seq > this.#last) this.#last = seq
    // this node's own: already in its table (and file)
    if (node === this.#conf.node) return
    if (f[3] === 'e') {
      const epoch = Number(f[4])
      if (Number.isInteger(epoch) && epoch > 0) this.#hub.remoteEpoch(epoch, node)
      return
    }
    const key = parseKeyHex(f[4] ?? '')
    const at = Number(f[5])
    const exp = Number(f[6])
    if (f[3] !== 'r' || key === null || !Number.isInteger(at) || !Number.isInteger(exp)) return
    this.#hub.remote({ ka: key[0], kb: key[1], at, exp })
    // written into this node's table: the node that revoked it may answer its request
    this.#redis.publish(this.#ackChannel, `${f[1]} ${this.#conf.node}`).catch(() => {})
  }

  /** "<id> <node>" */
  #acked (text: string): void {
    const [id, node] = text.split(' ')
    const a = this.#acks.get(id ?? '')
    if (a === undefined || node === undefined) return
    a.waiting.delete(node)
    if (a.waiting.size === 0) a.done()
  }

  async #poll (): Promise<void> {
    if (this.#polling) return
    this.#polling = true
    const sent = performance.now() // a failure counts once per stall (health.ts)
    try {
      while (this.#pending.length > 0) {
        if (!await this.#send(this.#pending[0]!, `${this.#conf.node}:${++this.#count}`)) return
        this.#pending.shift()
      }
      if (this.#pendingEpoch > 0) {
        const epoch = this.#pendingEpoch
        this.#pendingEpoch = 0
        await this.publishEpoch(epoch)
      }
      const seq = Number(await this.#redis.get(this.#seqKey) ?? 0)
      this.#health.ok()
      if (this.#seed || seq < this.#last) {
        // Redis lost what it had (restarted empty), or this node could not seed it at start
        await this.#seedRedis()
        this.#last = 0
        await this.#readAll()
        this.#seed = false
      } else if (seq > this.#last) {
        // announcements up to `seq` had a whole poll to arrive: one was missed (a reconnect)
        if (this.#behind > this.#last) await this.#readAll()
        else this.#behind = seq
      }
    } catch (err) {
      this.#health.failed(err as Error, sent)
    } finally {
      this.#polling = false
    }
  }

  /** This node's live entries and epoch into Redis. */
  async #seedRedis (): Promise<void> {
    const entries = this.#hub.table.entries(unixNow())
    const epoch = this.#hub.table.epoch()
    for (let i = 0; i === 0 || i < entries.length; i += BATCH) {
      const args: Array<string | number> = [epoch]
      for (const r of entries.slice(i, i + BATCH)) args.push(r.exp, `${keyHex(r.ka, r.kb)}:${r.at}`)
      await runScript(this.#redis, REVOKE_SEED, [this.#key, this.#seqKey, this.#epochKey], args)
    }
  }

  /** Every entry and the epoch of Redis into this node's table (ZSCAN: an entry there all along is seen at least once). */
  async #readAll (): Promise<void> {
    const [seq, epoch] = await this.#redis.mget(this.#seqKey, this.#epochKey)
    if (epoch != null && Number(epoch) > 0) this.#hub.remoteEpoch(Number(epoch), 'a node of the cluster')
    let cursor = '0'
    do {
      const [next, page] = await this.#redis.zscan(this.#key, cursor, 'COUNT', BATCH)
      cursor = next
      for (let i = 0; i + 1 < page.length; i += 2) {
        const [hex, at] = page[i]!.split(':')
        const key = parseKeyHex(hex ?? '')
        const exp = Number(page[i + 1])
        if (key !== null && Number.isInteger(Number(at)) && Number.isInteger(exp)) this.#hub.remote({ ka: key[0], kb: key[1], at: Number(at), exp })
      }
    } while (cursor !== '0')
    this.#last = Math.max(this.#last, Number(seq ?? 0))
    this.#behind = 0
    this.#health.ok()
  }
}
