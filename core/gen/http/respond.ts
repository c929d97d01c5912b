// Whole answers of the generation API (not streams): JSON, text, and errors in
// the shape of the API the route speaks (core/api-errors.ts decides it).

import type { GenResponse } from './gen-response.js'
import { type ApiShape, errorBody, JSON_CONTENT_TYPE } from '../../api-errors.js'
import type { ApiError } from '../dispatch/request.js'

export function sendJson (res: GenResponse, status: number, body: string, retryAfter = 0): void {
  if (res.headersSent) {
    res.end()
    return
  }
  const headers: Record<string, string | number> = { 'content-type': JSON_CONTENT_TYPE, 'content-length': Buffer.byteLength(body) }
  if (retryAfter > 0) headers['retry-after'] = retryAfter
  res.writeHead(status, headers)
  res.end(body)
}

export function sendText (res: GenResponse, status: number, text: string, retryAfter = 0): void {
  const headers: Record<string, string | number> = { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(text) }
  if (retryAfter > 0) headers['retry-after'] = retryAfter
  res.writeHead(status, headers)
  res.end(text)
}

/** An error answer in the route's API shape (nothing may have been sent yet), with its Retry-After if it has one. */
export function sendError (res: GenResponse, api: ApiShape, e: ApiError): void {
  const body = errorBody(api, e.status, e.message, e)
  if (api === 'text') sendText(res, e.status, body, e.retryAfter)
  else sendJson(res, e.status, body, e.retryAfter)
}
