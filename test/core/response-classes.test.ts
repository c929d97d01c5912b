// An entry point's responses by class (`show stat` FRONTEND hrsp_*), read
// from its request row (core/shm/request-stats.ts): every status in its class,
// a status outside 100-599 as hrsp_other, and a gRPC call, counted in the row
// by its grpc-status, by the class of the HTTP status lb counted it under.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createShm } from '../../core/shm/buffer.js'
import { stripeBase } from '../../core/shm/layout.js'
import { recordRequest, responseClasses } from '../../core/shm/request-stats.js'

test('responseClasses: an entry point\'s hrsp_1xx..hrsp_5xx and hrsp_other, gRPC calls included', () => {
  const shm = createShm(2)
  const count = (stripe: number, ep: number, method: string, status: number, grpc = -1): void =>
    recordRequest(shm.f64, stripeBase(stripe), ep, -1, method, status, grpc, 1, 0, 0, false)
  count(0, 1, 'GET', 200)
  count(1, 1, 'POST', 201)
  count(0, 1, 'GET', 299) // a code without a cell of its own: its class's
  count(1, 1, 'HEAD', 304)
  count(0, 1, 'PROPFIND', 404)
  count(0, 1, 'GET', 101)
  count(1, 1, 'GET', 503)
  count(0, 1, 'GET', 999) // outside 100-599
  count(0, 1, 'POST', 200, 0) // gRPC: OK
  count(1, 1, 'POST', 200, 14) // gRPC: the server's UNAVAILABLE, HTTP 200
  count(0, 1, 'POST', 502, 14) // gRPC: lb's 502, sent as 200 + grpc-status 14, counted as 502
  count(0, 0, 'GET', 200) // another entry point
  assert.deepEqual(responseClasses(shm, 1), [1, 5, 1, 1, 2, 1])
  assert.deepEqual(responseClasses(shm, 0), [0, 1, 0, 0, 0, 0])
})
