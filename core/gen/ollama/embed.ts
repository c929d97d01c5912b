// Ollama's embedding replies: /api/embed {model, embeddings, total_duration,
// load_duration, prompt_eval_count} and the legacy /api/embeddings {embedding}.

import type { ServerResponse } from 'node:http'
import type { EmbedWriter } from '../dispatch/embedding.js'
import type { ApiError } from '../dispatch/request.js'
import { sendError, sendJson } from '../http/respond.js'

export function ollamaEmbedWriter (res: ServerResponse, model: string, legacy: boolean): EmbedWriter {
  return {
    done (vectors, promptTokens, loadNs, totalNs) {
      const body = legacy
        ? { embedding: vectors[0] ?? [] }
        : { model, embeddings: vectors, total_duration: totalNs, load_duration: loadNs, prompt_eval_count: promptTokens }
      sendJson(res, 200, JSON.stringify(body))
    },
    fail (e: ApiError) { if (!res.writableEnded && !res.destroyed) sendError(res, 'ollama', e) },
  }
}
