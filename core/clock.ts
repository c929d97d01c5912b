// Coarse clock for hot paths: a millisecond tick refreshed every CLOCK_MS by a
// timer instead of a Date.now() call per use (undici's timers.js idea). Values
// are wall-clock milliseconds truncated to 32 bits (Date.now() | 0) so they fit
// shared Int32 words; compare two ticks with ((a - b) | 0), valid under 24 days.

export const CLOCK_MS = 10

let tick = Date.now() | 0
let timer: NodeJS.Timeout | null = null

/** Current tick, at most CLOCK_MS stale once startClock() ran. */
export function now (): number {
  return timer === null ? Date.now() | 0 : tick
}

export function startClock (): void {
  if (timer !== null) return
  tick = Date.now() | 0
  timer = setInterval(() => { tick = Date.now() | 0 }, CLOCK_MS)
  timer.unref()
}

let isoMs = 0
let iso = ''

/**
 * The wall clock as RFC 3339 UTC with milliseconds (Date's toISOString), built at most once per millisecond: a
 * streamed reply stamps every batch of tokens with it (Ollama's created_at), tens a millisecond per worker under
 * load, and each toISOString costs ~0.5 µs against ~40 ns for Date.now().
 */
export function isoNow (): string {
  const ms = Date.now()
  if (ms !== isoMs) {
    isoMs = ms
    iso = new Date(ms).toISOString()
  }
  return iso
}
