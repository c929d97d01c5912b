// `show models` on the runtime socket: one line per (model server, model),
// in `show servers state`'s form (a "# field..." header, then space-separated
// rows): the local models first, then each [[generation.servers]] entry's.
// Read from the generation service's view (core/gen/view.ts) at each call.
import type { AdminContext } from '../context.js'

const HEADER = '# server model loaded in_flight requests input_tokens output_tokens server_up'

export function showModels (ctx: AdminContext): string[] {
  const stats = ctx.gen()
  if (stats === null) return ['The generation service is not running (no [generation] section, or it failed to start).']
  const out = [HEADER]
  for (const s of stats.view().servers) {
    for (const m of s.models) {
      out.push([s.name, m.model, m.loaded ? 'yes' : 'no', m.inFlight, m.requests, m.inputTokens, m.outputTokens, s.up ? 1 : 0].join(' '))
    }
  }
  return out
}
