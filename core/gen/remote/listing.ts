// The remote servers' models in the listings of both APIs (/api/tags,
// /api/ps, /api/show, /v1/models, /v1/models/{id}), after the local ones: a
// name served here is listed once, as the local model (which is what a
// request for it gets). Ollama-kind entries are the servers' own; an
// openai-kind server's models get the fields OpenAI's listing has. An alias
// is listed under its own name when some server lists its target.

import { request } from 'undici'
import type { RemoteRegistry } from './registry.js'
import type { RemoteModel, RemoteServer } from './server.js'

type Json = Record<string, unknown>

const created = (m: RemoteModel): number => typeof m.entry.created === 'number' ? m.entry.created : 0

const EMPTY_DETAILS = { parent_model: '', format: '', family: '', families: null, parameter_size: '', quantization_level: '' }

/** An Ollama /api/tags entry for a remote model, named `name`. */
function tagEntry (s: RemoteServer, m: RemoteModel, name: string): Json {
  if (s.conf.kind !== 'openai') return { ...m.entry, name, model: name }
  return { name, model: name, modified_at: new Date(created(m) * 1000).toISOString(), size: 0, digest: '', details: EMPTY_DETAILS }
}

/** An OpenAI model object for a remote model, named `id`. */
export function openaiEntry (s: RemoteServer, m: RemoteModel, id: string): Json {
  if (s.conf.kind === 'openai') return { ...m.entry, id, object: 'model' }
  const at = typeof m.entry.modified_at === 'string' ? Date.parse(m.entry.modified_at) : NaN
  return { id, object: 'model', created: Number.isNaN(at) ? 0 : Math.floor(at / 1000), owned_by: s.conf.name }
}

/** Remote entries, then aliases, not named in `local` (canonical names listed already). */
function each (reg: RemoteRegistry, local: ReadonlySet<string>, make: (s: RemoteServer, m: RemoteModel, name: string) => Json): Json[] {
  const out: Json[] = []
  const all = reg.models()
  for (const [name, { server, model }] of all) if (!local.has(name)) out.push(make(server, model, model.served))
  for (const [alias, to] of reg.servedAliases()) {
    const t = all.get(to)
    if (t !== undefined && !local.has(alias) && !all.has(alias)) out.push(make(t.server, t.model, alias))
  }
  return out
}

export const remoteTags = (reg: RemoteRegistry, local: ReadonlySet<string>): Json[] => each(reg, local, tagEntry)
export const remoteOpenAiModels = (reg: RemoteRegistry, local: ReadonlySet<string>): Json[] => each(reg, local, openaiEntry)

/** The models the servers have loaded (Ollama's /api/ps entries), not named in `local`. */
export function remotePs (reg: RemoteRegistry, local: ReadonlySet<string>): Json[] {
  const out: Json[] = []
  const seen = new Set(local)
  for (const s of reg.servers) {
    if (!s.up) continue
    for (const [name, entry] of s.loaded) {
      if (!seen.has(name)) out.push(entry)
      seen.add(name)
    }
  }
  return out
}

/** /api/show of a remote model: the server's own answer (ollama and lb kinds), else what an OpenAI listing says. */
export async function remoteShow (s: RemoteServer, m: RemoteModel): Promise<Json> {
  if (s.conf.kind !== 'openai') {
    try {
      const r = await request(`${s.conf.url}/api/show`, { method: 'POST', headers: s.headers(), body: JSON.stringify({ model: m.served }), signal: AbortSignal.timeout(5_000) })
      const body = await r.body.json() as Json
      if (r.statusCode === 200 && typeof body === 'object' && body !== null) return body
    } catch {}
  }
  return { modelfile: '', parameters: '', template: '', details: EMPTY_DETAILS, model_info: {}, capabilities: ['completion'] }
}
