// The body of an error answer in the API shape of its caller: the one place
// that decides it, for every refusal lb makes itself on the way to the
// generation service (the data plane's 401, 413, 429, 502-504 in front of a
// kind = "generate" service) and for the generation service's own answers.
// - text: lb's plain answer (web routes), the message and a line end;
// - ollama: Ollama's {"error": "..."};
// - openai: OpenAI's {"error": {"message", "type", "param", "code"}}, which the
//   official clients read to pick their error class and show the message.
// Imports nothing: the data plane and core/gen both use it (neither may import the other).

export type ApiShape = 'text' | 'ollama' | 'openai'

/** What only OpenAI's shape carries: the request field at fault, and a machine-readable code. */
export interface ErrorDetail {
  param?: string | null
  code?: string | null
}

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8'

/** The client API a request to a generation service speaks: OpenAI's under /v1/, Ollama's elsewhere. */
export function apiOfPath (path: string): 'ollama' | 'openai' {
  return path.startsWith('/v1/') || path === '/v1' ? 'openai' : 'ollama'
}

/** OpenAI's `type` by status, as its API and the servers compatible with it (vLLM, llama.cpp, Ollama) use them. */
export function openaiErrorType (status: number): string {
  if (status === 401) return 'authentication_error'
  if (status === 403) return 'permission_error'
  if (status === 404) return 'not_found_error'
  if (status === 429) return 'rate_limit_error'
  return status >= 500 ? 'server_error' : 'invalid_request_error'
}

/** The error object of OpenAI's body (also what a stream carries as its last event). */
export function openaiError (status: number, message: string, detail?: ErrorDetail): { error: Record<string, unknown> } {
  const code = detail?.code ?? (status === 429 ? 'rate_limit_exceeded' : null)
  return { error: { message, type: openaiErrorType(status), param: detail?.param ?? null, code } }
}

/** The whole body of an error answer. */
export function errorBody (shape: ApiShape, status: number, message: string, detail?: ErrorDetail): string {
  switch (shape) {
    case 'text': return message + '\n'
    case 'ollama': return JSON.stringify({ error: message })
    case 'openai': return JSON.stringify(openaiError(status, message, detail))
    default: { const never: never = shape; throw new Error(`unknown API shape ${String(never)}`) }
  }
}

/**
 * A plain-text answer made in front of a generation service (a middleware's 401 or 429, the 413 of max_body)
 * in the caller's shape: the text becomes the message, the other headers (Retry-After, WWW-Authenticate) stay.
 */
export function shapeAnswer (shape: 'ollama' | 'openai', status: number, headers: readonly string[], body: string): { headers: string[], body: string } {
  const out: string[] = []
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i]!.toLowerCase() !== 'content-type') out.push(headers[i]!, headers[i + 1]!)
  }
  out.push('content-type', JSON_CONTENT_TYPE)
  return { headers: out, body: errorBody(shape, status, body.trim()) }
}
