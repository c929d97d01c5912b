// The end of the current event-loop turn, for socket writes made while a turn's
// events are handled: they are held back to it (one Immediate per turn for the
// whole thread: the check phase, right after the poll phase that ran those events).
//
// Why: a write on loopback wakes the peer that reads it (the backend, the
// client). Made in the middle of the turn, each wake-up can preempt this thread
// before it has handled its other ready sockets, on a machine whose cores the
// peers share. Made together at the end of the turn, a peer woken by the first
// write is merely runnable for the rest. Measured: about 1 µs less kernel time
// per proxied request, and fewer context switches (bench/RESULTS.md, "Data
// plane", "What was tried").
// The delay is bounded by one turn: microseconds under load.

export interface AtTurnEnd {
  /** Runs once per atTurnEnd call, in the order of the calls. Must not throw. */
  turnEnd (): void
}

const queue: AtTurnEnd[] = []
let scheduled = false
let turn = 0

export function atTurnEnd (x: AtTurnEnd): void {
  queue.push(x)
  if (!scheduled) {
    scheduled = true
    setImmediate(runTurnEnd)
  }
}

/** Number of the current turn. It changes once the turn's queue has run: data kept for it (a staging buffer) is free again. */
export function currentTurn (): number {
  return turn
}

function runTurnEnd (): void {
  try {
    // an entry queued while this runs is reached by the same loop
    for (let i = 0; i < queue.length; i++) queue[i]!.turnEnd()
  } finally {
    queue.length = 0
    scheduled = false
    turn++
  }
}
