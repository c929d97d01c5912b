// Reading a model server's streamed reply as it arrives: Ollama's NDJSON (one
// JSON object per line) and OpenAI's server-sent events (`data: ...` lines,
// an event ends at a blank line). Both are cut into lines first; a chunk of
// bytes may end inside a line or inside a UTF-8 character, so the partial
// line (and the decoder's partial character) waits for the next chunk.
// Each chunk yields the messages it completed, as one batch: the caller
// writes one batch to its client in one write.

import { StringDecoder } from 'node:string_decoder'

/** Lines longer than this (a runaway server) fail the stream rather than grow memory without bound: 16 MiB. */
export const MAX_LINE = 16 << 20

export class LineSplitter {
  private readonly decoder = new StringDecoder('utf8')
  private rest = ''

  /** The complete lines of `chunk` (without their line ends, "\r\n" or "\n"). Throws on a line over MAX_LINE. */
  push (chunk: Buffer): string[] {
    const text = this.rest + this.decoder.write(chunk)
    const out: string[] = []
    let from = 0
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', from)) {
      const end = nl > from && text.charCodeAt(nl - 1) === 13 ? nl - 1 : nl
      out.push(text.slice(from, end))
      from = nl + 1
    }
    this.rest = text.slice(from)
    if (this.rest.length > MAX_LINE) throw new Error(`a line longer than ${MAX_LINE} bytes`)
    return out
  }

  /** What is left at the end of the body (a last line without its line end). */
  end (): string[] {
    const last = this.rest + this.decoder.end()
    this.rest = ''
    return last === '' ? [] : [last]
  }
}

/** NDJSON: each non-empty line is one JSON value. Throws on a line that is not JSON. */
export class NdjsonReader {
  private readonly lines = new LineSplitter()

  push (chunk: Buffer): unknown[] { return parseAll(this.lines.push(chunk)) }
  end (): unknown[] { return parseAll(this.lines.end()) }
}

function parseAll (lines: string[]): unknown[] {
  const out: unknown[] = []
  for (const l of lines) if (l.trim() !== '') out.push(JSON.parse(l))
  return out
}

/** SSE: the data of each event (its `data:` lines joined by "\n"); comments, `event:`, `id:` and `retry:` are skipped. */
export class SseReader {
  private readonly lines = new LineSplitter()
  private data: string[] = []

  push (chunk: Buffer): string[] { return this.events(this.lines.push(chunk)) }
  /** A last event not closed by a blank line still counts (as browsers' EventSource does not, but servers forget it). */
  end (): string[] { return this.events([...this.lines.end(), '']) }

  private events (lines: string[]): string[] {
    const out: string[] = []
    for (const l of lines) {
      if (l === '') {
        if (this.data.length > 0) out.push(this.data.join('\n'))
        this.data = []
      } else if (l.startsWith('data:')) {
        this.data.push(l.charCodeAt(5) === 32 ? l.slice(6) : l.slice(5))
      }
    }
    return out
  }
}
