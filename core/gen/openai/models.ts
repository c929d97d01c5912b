// GET /v1/models and /v1/models/{id}: the models the catalog serves, in
// OpenAI's list shape; `owned_by` is the name's namespace, as Ollama says it
// ("library" for a plain name).

import type { ModelEntry } from '../models/catalog.js'

export function modelObject (e: ModelEntry): Record<string, unknown> {
  const slash = e.name.lastIndexOf('/')
  const ns = slash < 0 ? 'library' : e.name.slice(0, slash).split('/').pop()!
  return { id: e.name, object: 'model', created: Math.floor(e.modifiedAt.getTime() / 1000), owned_by: ns }
}

export const modelList = (entries: readonly ModelEntry[]): Record<string, unknown> =>
  ({ object: 'list', data: entries.map(modelObject) })
