// Model names as Ollama writes them: [host/][namespace/]model[:tag]. The
// canonical form is lower case, the tag defaults to "latest", and the default
// registry and namespace ("registry.ollama.ai/library/") are dropped, so
// "Llama3.2", "llama3.2:latest" and "registry.ollama.ai/library/llama3.2"
// all name the same model.

export const DEFAULT_HOST = 'registry.ollama.ai'
export const DEFAULT_NAMESPACE = 'library'

const PART = /^[a-z0-9][a-z0-9._-]*$/
const TAG = /^[a-z0-9_][a-z0-9._-]{0,127}$/

/** Canonical "name:tag", or null when `raw` is not a valid model name. */
export function parseModelName (raw: string): string | null {
  let s = raw.trim().toLowerCase()
  if (s === '' || s.length > 350) return null
  let tag = 'latest'
  const slash = s.lastIndexOf('/')
  const colon = s.lastIndexOf(':')
  if (colon > slash) {
    tag = s.slice(colon + 1)
    s = s.slice(0, colon)
  }
  if (!TAG.test(tag)) return null
  if (s.startsWith(`${DEFAULT_HOST}/${DEFAULT_NAMESPACE}/`)) s = s.slice(DEFAULT_HOST.length + DEFAULT_NAMESPACE.length + 2)
  else if (s.startsWith(`${DEFAULT_HOST}/`)) s = s.slice(DEFAULT_HOST.length + 1)
  const parts = s.split('/')
  if (parts.length > 3) return null
  for (let i = 0; i < parts.length; i++) {
    // a registry host may carry a port: "localhost:5000/ns/model"
    const p = i === 0 && parts.length === 3 ? parts[i]!.replace(/:\d{1,5}$/, '') : parts[i]!
    if (!PART.test(p)) return null
  }
  return `${s}:${tag}`
}

/** Display name of a manifest path in an Ollama store (host, namespace, model, tag). */
export function storeName (host: string, namespace: string, model: string, tag: string): string | null {
  const full = host === DEFAULT_HOST
    ? (namespace === DEFAULT_NAMESPACE ? model : `${namespace}/${model}`)
    : `${host}/${namespace}/${model}`
  return parseModelName(`${full}:${tag}`)
}
