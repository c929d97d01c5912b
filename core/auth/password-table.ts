// A set of htpasswd users, checked so that answer times do not tell which
// names exist, whatever mix of hash kinds the set holds.
//
// Hashes fall into cost classes: a kind, and for bcrypt its cost factor. A
// check costs one hash of every class in the set: the user's own hash in its
// class and a decoy (a hash no password matches, decoyOf) in every other one;
// an unknown name gets a decoy in every class. With one class, the usual
// htpasswd file, that is one check, as before. With a {SHA} user beside a
// bcrypt one, the {SHA} user also pays a bcrypt check, so both users and an
// unknown name cost the same; a single decoy of one kind would have answered
// the {SHA} user in microseconds and every other name in tens of ms.
import { type HtpasswdEntry, decoyOf, verifyAsync, verifySync } from './htpasswd.js'

/** "bcrypt10", "apr1", ...: hashes of one class cost the same to check. */
function costClass (e: HtpasswdEntry): string {
  // "$2y$10$..." → the cost factor is characters 4-5
  return e.kind === 'bcrypt' ? `bcrypt${e.hash.slice(4, 6)}` : e.kind
}

export class PasswordTable {
  /** user → [entry, index of its class in #decoys] */
  readonly #users = new Map<string, readonly [HtpasswdEntry, number]>()
  /** one decoy per class, in the order the classes first appear */
  readonly #decoys: readonly HtpasswdEntry[]
  /** no class is bcrypt: a check runs on the calling thread (checkSync) */
  readonly #sync: boolean

  /** `entries` has at least one entry, and no user twice (validation refuses both). */
  constructor (entries: readonly HtpasswdEntry[]) {
    const classes: string[] = []
    const decoys: HtpasswdEntry[] = []
    for (const e of entries) {
      const c = costClass(e)
      let i = classes.indexOf(c)
      if (i < 0) {
        i = classes.push(c) - 1
        decoys.push(decoyOf(e))
      }
      this.#users.set(e.user, [e, i])
    }
    this.#decoys = decoys
    this.#sync = entries.every((e) => e.kind !== 'bcrypt')
  }

  /** The hash checked in class `i`: the user's own in its class, else that class's decoy. */
  #entry (known: readonly [HtpasswdEntry, number] | undefined, i: number): HtpasswdEntry {
    return known !== undefined && known[1] === i ? known[0] : this.#decoys[i]!
  }

  /** Whether `password` is `name`'s; null when a class is bcrypt, which only check() runs (off this thread). */
  checkSync (name: string, password: string): boolean | null {
    if (!this.#sync) return null
    const known = this.#users.get(name)
    let ok = false
    for (let i = 0; i < this.#decoys.length; i++) {
      const e = this.#entry(known, i)
      // every class runs, whatever an earlier one answered: an early return would show in the time
      const match = verifySync(e, password) === true
      if (e === known?.[0]) ok = match
    }
    return ok
  }

  /** Whether `password` is `name`'s. Rejects with LB_ERR_AUTH_BUSY when the bcrypt thread's queue is full. */
  async check (name: string, password: string): Promise<boolean> {
    const known = this.#users.get(name)
    let ok = false
    for (let i = 0; i < this.#decoys.length; i++) {
      const e = this.#entry(known, i)
      const match = verifySync(e, password) ?? await verifyAsync(e, password)
      if (e === known?.[0]) ok = match
    }
    return ok
  }
}
