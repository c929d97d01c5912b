// Request methods, raw bytes both sides of a real 2-worker balancer: CONNECT
// and TRACE (any case, any target form uWS accepts) are refused with 501 and
// close, and never reach the backend; every other token, extension and
// lower-case methods included, is forwarded exactly as written.
import { strict as assert } from 'node:assert'
import { after, before, describe, test } from 'node:test'
import { type Lb, simpleConfig, startLb } from '../helpers.js'
import { OK, type RawBackend, exchange, startRawBackend } from './raw-http.js'

describe('request methods', () => {
  let backend: RawBackend, lb: Lb
  let n = 0
  const fresh = (): string => `/m-${++n}`

  before(async () => {
    backend = await startRawBackend(() => OK)
    lb = await startLb('[global]\nworkers = 2\n' + simpleConfig([backend.address]))
  })
  after(async () => { await lb.stop(); await backend.close() })

  test('CONNECT and TRACE: 501 naming the method, the connection closed, nothing forwarded', async () => {
    for (const method of ['CONNECT', 'TRACE', 'trace', 'Connect']) {
      for (const target of [fresh(), `/${fresh()}`]) {
        const a = await exchange(lb.port, `${method} ${target} HTTP/1.1\r\nhost: a\r\n\r\n`, { waitClose: true })
        assert.equal(a.status, 501, `${method} ${target}: ${JSON.stringify(a.text)}`)
        assert.equal(a.responses[0]!.body, `not implemented: method ${method} (lb forwards neither CONNECT tunnels nor TRACE)\n`)
        assert.match(a.responses[0]!.head, /\r\nconnection: close/i)
        assert.ok(a.closed)
        assert.ok(!backend.received().includes(target.replace(/^\/\//, '/')), `${method} ${target} reached the backend`)
      }
    }
  })

  test('extension and lower-case methods are tokens, forwarded as written', async () => {
    for (const method of ['get', 'P&ST', 'POS0', 'PROPFIND', 'PURGE']) {
      const path = fresh()
      const a = await exchange(lb.port, `${method} ${path} HTTP/1.1\r\nhost: a\r\ncontent-length: 0\r\n\r\n`)
      assert.equal(a.status, 200, `${method}: ${JSON.stringify(a.text)}`)
      assert.ok(backend.heads.some((h) => h.startsWith(`${method} ${path} HTTP/1.1\r\n`)), `${method} not forwarded as written`)
    }
  })
})
