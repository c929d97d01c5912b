// The dashboard API shows each middleware's options (/api/http/middlewares,
// /api/rawdata), and its listener may be open without credentials: no secret
// a middleware holds may appear there, whatever the option is called.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { middlewareOptions } from '../../core/admin/traefik/traefik-view.js'
import type { MiddlewareConf } from '../../core/config/dynamic.js'

const view = (type: string, conf: Record<string, unknown>): string =>
  JSON.stringify(middlewareOptions({ name: 'm', type, conf } as unknown as MiddlewareConf))

test('a plugin option whose name speaks of a secret is redacted, whatever its exact name', () => {
  const shown = view('thirdParty', { apiKey: 'AK', clientSecret: 'CS', redisPassword: 'RP', accessToken: 'AT', privateKey: 'PK', credentials: 'CR', passphrase: 'PP', nested: { secretKey: 'SK' }, realm: 'shown', timeoutMs: 1500 })
  for (const secret of ['"AK"', '"CS"', '"RP"', '"AT"', '"PK"', '"CR"', '"PP"', '"SK"']) assert.ok(!shown.includes(secret), `${secret} in ${shown}`)
  assert.match(shown, /"realm":"shown"/)
  assert.match(shown, /"timeout":"1\.5s"/)
})

test('the headers middleware: values of credential headers are redacted, the others shown', () => {
  const shown = view('headers', { requestSet: ['authorization', 'Bearer UPSTREAM-SECRET', 'x-api-key', 'K-123', 'x-env', 'prod'], responseSet: ['set-cookie', 'sid=1', 'x-frame-options', 'DENY'] })
  for (const secret of ['UPSTREAM-SECRET', 'K-123', 'sid=1']) assert.ok(!shown.includes(secret), `${secret} in ${shown}`)
  assert.match(shown, /"x-env","prod"/)
  assert.match(shown, /"x-frame-options","DENY"/)
  assert.match(shown, /"authorization","<redacted>"/)
})
