// Leveled logger writing one JSON object per line to stderr (stdout is kept for
// the access log when it goes there). Check `log.debugEnabled` before building
// an expensive debug message on a hot path.

export const LEVELS = ['debug', 'info', 'warn', 'error'] as const
export type Level = typeof LEVELS[number]

export interface Logger {
  readonly debugEnabled: boolean
  debug (msg: string, fields?: Record<string, unknown>): void
  info (msg: string, fields?: Record<string, unknown>): void
  warn (msg: string, fields?: Record<string, unknown>): void
  error (msg: string, fields?: Record<string, unknown>): void
  child (fields: Record<string, unknown>): Logger
}

export type Sink = (line: string) => void

// A stderr nobody reads any more (journald restarted, the reader of a pipe gone: EPIPE) must neither stop nor
// spin lb: unhandled, the stream's error would be reported as a fault, whose log line fails again, forever.
// Lines are dropped from then on; there is no one left to tell.
let stderrOpen = true
process.stderr.on('error', () => { stderrOpen = false })
const stderrSink: Sink = (line) => { if (stderrOpen) process.stderr.write(line + '\n') }

export function createLogger (level: Level = 'info', base: Record<string, unknown> = {}, sink: Sink = stderrSink): Logger {
  const min = LEVELS.indexOf(level)
  const write = (lvl: Level, msg: string, fields?: Record<string, unknown>): void => {
    if (LEVELS.indexOf(lvl) < min) return
    sink(JSON.stringify({ time: new Date().toISOString(), level: lvl, msg, ...base, ...fields }))
  }
  return {
    debugEnabled: min === 0,
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
    child: (fields) => createLogger(level, { ...base, ...fields }, sink),
  }
}
