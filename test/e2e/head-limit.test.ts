// [limits] max_header_bytes: request heads up to it are served (uWS's own 4 KiB
// refused an 8 KB Cookie), a larger one gets 431 naming the setting, closed and
// never forwarded; uWS's limit is twice the setting (set when its binary loads).
import { strict as assert } from 'node:assert'
import net from 'node:net'
import { after, before, describe, test } from 'node:test'
import { type Lb, sleep, startLb } from '../helpers.js'
import { mwConfig, problems } from '../plugins/setup.js'
import { OK, type RawBackend, exchange, startRawBackend } from './raw-http.js'

/** A GET for `path` whose head is `bytes` long (a Cookie fills it), as request-check.ts counts it. */
function headOf (path: string, bytes: number): string {
  const start = `GET ${path} HTTP/1.1\r\nhost: a\r\ncookie: `
  return start + 'c'.repeat(bytes - start.length - 4) + '\r\n\r\n'
}

describe('limits.max_header_bytes', () => {
  let backend: RawBackend, lb: Lb, big: Lb
  before(async () => {
    backend = await startRawBackend(() => OK)
    lb = await startLb(mwConfig(backend.address, '', { '/': [] }))
    big = await startLb('[limits]\nmax_header_bytes = "64k"\n' + mwConfig(backend.address, '', { '/': [] }))
  })
  after(async () => { await lb.stop(); await big.stop(); await backend.close() })

  const forwarded = (path: string): boolean => backend.heads.some((h) => h.startsWith(`GET ${path} `))

  test('by default (16k) an 8 KB Cookie and a head of exactly 16 KiB are served', async () => {
    for (const [path, n] of [['/eight', 8 * 1024], ['/sixteen', 16 * 1024]] as const) {
      const a = await exchange(lb.port, headOf(path, n))
      assert.equal(a.status, 200, `${n}: ${a.text.slice(0, 200)}`)
      assert.ok(forwarded(path))
    }
  })

  test('one byte over: 431 naming the setting, the connection closed, nothing forwarded', async () => {
    const a = await exchange(lb.port, headOf('/over', 16 * 1024 + 1), { waitClose: true })
    assert.equal(a.status, 431, a.text.slice(0, 300))
    assert.match(a.responses[0]!.body, /request head of 16385 bytes is larger than limits\.max_header_bytes \(16384 bytes\)/)
    assert.ok(a.closed)
    assert.ok(!forwarded('/over'))
  })

  test('over twice the setting: uWS answers 431 itself; nothing forwarded', async () => {
    const a = await exchange(lb.port, headOf('/far', 40 * 1024), { waitClose: true })
    assert.equal(a.status, 431, a.text.slice(0, 300))
    assert.ok(a.closed)
    assert.ok(!forwarded('/far'))
  })

  test('"64k" serves a 40 KB head at once, and a 60 KB one that arrives in pieces', async () => {
    const a = await exchange(big.port, headOf('/forty', 40 * 1024))
    assert.equal(a.status, 200, a.text.slice(0, 200))
    const head = headOf('/pieces', 60 * 1024)
    const text = await new Promise<string>((resolve) => {
      const s = net.connect(big.port, '127.0.0.1', async () => {
        for (let i = 0; i < head.length; i += 7000) { s.write(head.slice(i, i + 7000)); await sleep(20) }
      })
      let got = ''
      s.on('data', (d: Buffer) => { got += d.toString('latin1'); if (got.endsWith('ok')) { s.destroy(); resolve(got) } })
      s.on('error', () => {})
      s.on('close', () => resolve(got))
    })
    assert.match(text, /^HTTP\/1\.1 200 /, text.slice(0, 200))
    assert.ok(forwarded('/forty') && forwarded('/pieces'))
  })

  test('lb check refuses a value out of range or not a size, naming the key', () => {
    for (const v of ['"2k"', '"2M"', '"lots"', '-1']) {
      assert.match(problems(`[limits]\nmax_header_bytes = ${v}\n` + mwConfig('127.0.0.1:1', '', { '/': [] })), /limits\.max_header_bytes/, v)
    }
  })
})
