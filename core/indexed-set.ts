// An unordered set of objects that each hold their own position in it: add and
// delete in O(1), with no hashing and, once the array has grown to the set's
// usual size, no allocation (delete moves the last member into the freed place).
//
// For a long-lived set that members join and leave once per request, many in
// it at once (the exchanges in flight of a worker). A JS Set used that way kept
// finished members reachable through young-generation GCs, which then promoted
// them: with the proxy's exchanges, 3.3 MB survived each scavenge and 3 MB were
// promoted at V8's largest semi-space (pauses 6-9 ms), and 480 KB at the
// workers' capped one (4 MB), against 30-35 KB with this array (bench/RESULTS.md,
// "Data plane", "What was tried"; test/core/indexed-set.test.ts). Probably V8's
// Set tables: one a Set outgrows stays linked to its successor for iterators,
// and a dead one already promoted is a root to the scavenger until the next full
// GC. A Set per connection holding one request at a time showed none of this.
// A member is in one IndexedSet at a time.

export interface Indexed {
  /** position in the IndexedSet that holds this object; -1 when in none */
  setIndex: number
}

export class IndexedSet<T extends Indexed> {
  readonly #items: T[] = []

  get size (): number { return this.#items.length }

  /** The members, in no order; valid until the next add or delete. */
  get items (): readonly T[] { return this.#items }

  add (x: T): void {
    x.setIndex = this.#items.length
    this.#items.push(x)
  }

  /** Removes x (the last member takes its place); false when x was in no set. */
  delete (x: T): boolean {
    const i = x.setIndex
    if (i < 0) return false
    const last = this.#items.pop()!
    if (last !== x) {
      this.#items[i] = last
      last.setIndex = i
    }
    x.setIndex = -1
    return true
  }
}
