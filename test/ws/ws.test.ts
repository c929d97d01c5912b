// WebSocket proxying through the real balancer (2 workers) with the `ws`
// client and real `ws` servers: messages both ways (text, binary, large,
// fragmented), backpressure both ways, close codes, pings, routing and
// middlewares on the upgrade, balancing and failover, the idle time-out,
// ws:// wss:// and mTLS entry points, and survival across a reload.
import { strict as assert } from 'node:assert'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'
import type { WebSocket } from 'ws'
import { type Lb, freePort, sleep, startLb, waitFor } from '../helpers.js'
import { type Certs, makeCerts } from '../tls/certs.js'
import { type WsEcho, closed, connect, nextMessage, startWsEcho } from './echo.js'

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex')

describe('WebSocket proxying', () => {
  let e1: WsEcho, e2: WsEcho, refusing: WsEcho, flood: WsEcho, stall: WsEcho, lb: Lb, certs: Certs
  let small: number, secure: number, mtls: number, dead: number
  const config = (wsServers: string[]): string => `
[timeouts]
tunnel = "3s"
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[entrypoints.small]
address = "127.0.0.1:0"
websocket_max_message = "64k"
[entrypoints.websecure]
address = "127.0.0.1:0"
protocol = "https"
[entrypoints.websecure.tls]
cert = "${certs.server.cert}"
key = "${certs.server.key}"
[entrypoints.mtls]
address = "127.0.0.1:0"
protocol = "https"
[entrypoints.mtls.tls]
cert = "${certs.server.cert}"
key = "${certs.server.key}"
ca = "${certs.ca}"

[middlewares.ten-only]
type = "ipAllowList"
source_range = ["10.0.0.0/8"]

[routers.ws]
rule = "PathPrefix(\`/ws\`)"
service = "ws"
[routers.denied]
rule = "PathPrefix(\`/denied\`)"
middlewares = ["ten-only"]
service = "ws"
[routers.refuse]
rule = "PathPrefix(\`/refuse\`)"
service = "refusing"
[routers.flood]
rule = "PathPrefix(\`/flood\`)"
service = "flood"
[routers.stall]
rule = "PathPrefix(\`/stall\`)"
service = "stall"
[routers.failover]
rule = "PathPrefix(\`/failover\`)"
service = "failover"

[services.ws]
${wsServers.map((a) => `[[services.ws.servers]]\naddress = "${a}"\ncheck = false`).join('\n')}
[services.refusing]
[[services.refusing.servers]]
address = "${refusing.address}"
check = false
[services.flood]
[[services.flood.servers]]
address = "${flood.address}"
check = false
[services.stall]
[[services.stall.servers]]
address = "${stall.address}"
check = false
[services.failover]
[[services.failover.servers]]
name = "dead"
address = "127.0.0.1:${dead}"
check = false
[[services.failover.servers]]
name = "alive"
address = "${e1.address}"
check = false
`

  before(async () => {
    certs = makeCerts()
    e1 = await startWsEcho('e1', { protocols: ['chat.v1'] })
    e2 = await startWsEcho('e2', { protocols: ['chat.v1'] })
    refusing = await startWsEcho('refusing', { refuse: 404 })
    // on "go": 256 binary messages of 256 KiB, numbered, as fast as the socket takes them
    flood = await startWsEcho('flood', {
      onConnection: (ws) => ws.on('message', () => {
        for (let i = 0; i < 256; i++) {
          const m = Buffer.alloc(256 * 1024, i & 0xff)
          m.writeUInt32BE(i, 0)
          ws.send(m)
        }
      }),
    })
    // never reads: its socket is paused as soon as the WebSocket opens
    stall = await startWsEcho('stall', { onConnection: (ws) => (ws as unknown as { _socket: { pause (): void } })._socket.pause() })
    dead = await freePort() // a server address where nothing listens
    lb = await startLb(config([e1.address, e2.address]))
    // lb's own entry points are on port 0 (the mTLS one on node:tls in worker 0): the ports it bound
    ;[small, secure, mtls] = [await lb.portOf('small'), await lb.portOf('websecure'), await lb.portOf('mtls')]
  })
  after(async () => {
    await lb.stop()
    for (const e of [e1, e2, refusing, flood, stall]) await e.close()
  })

  test('text, binary, large and fragmented messages relay both ways over ws:// and wss://; forwarding headers; subprotocol', async () => {
    for (const [url, opts] of [[`ws://127.0.0.1:${lb.port}/ws/chat?room=1`, {}], [`wss://localhost:${secure}/ws/chat?room=1`, { ca: readFileSync(certs.ca) }]] as const) {
      const ws = await connect(url, opts, ['chat.v2', 'chat.v1'])
      assert.equal(ws.protocol, 'chat.v1', 'the server\'s choice of subprotocol reaches the client')
      assert.equal(ws.extensions, '', 'no permessage-deflate: extensions are not negotiated through the balancer')
      ws.send('hello')
      assert.deepEqual(await nextMessage(ws), { data: Buffer.from('hello'), binary: false })
      const bin = Buffer.from([0, 1, 2, 255])
      ws.send(bin)
      assert.deepEqual(await nextMessage(ws), { data: bin, binary: true })
      ws.send(Buffer.alloc(0))
      assert.equal((await nextMessage(ws)).data.length, 0)
      // 12 MiB each way: the server's answer comes back as one frame and is streamed to the client in fragments
      const big = Buffer.alloc(12 * 1024 * 1024)
      for (let i = 0; i < big.length; i += 4096) big.writeUInt32BE(i, i)
      ws.send(big)
      const back = await nextMessage(ws)
      assert.equal(back.binary, true)
      assert.equal(back.data.length, big.length)
      assert.equal(sha(back.data), sha(big))
      ws.close(1000)
      await closed(ws)
    }
    const h = e1.upgrades.concat(e2.upgrades)
    assert.equal(h.length, 2)
    assert.deepEqual(h.map((x) => x['x-forwarded-proto']).sort(), ['http', 'https'])
    for (const x of h) {
      assert.equal(x['x-forwarded-for'], '127.0.0.1')
      assert.equal(x['x-real-ip'], '127.0.0.1')
      assert.equal(x['sec-websocket-extensions'], undefined)
      assert.equal(x['sec-websocket-protocol'], 'chat.v2,chat.v1')
    }
  })

  test('a fragmented message from the server arrives whole', async () => {
    const ws = await connect(`ws://127.0.0.1:${lb.port}/ws`)
    ws.send('name?')
    const name = (await nextMessage(ws)).data.toString()
    const server = (name === 'e1' ? e1 : e2).sockets.at(-1)!
    server.send('frag', { fin: false, binary: false })
    server.send('ment', { fin: false })
    server.send('ed', { fin: true })
    assert.deepEqual(await nextMessage(ws), { data: Buffer.from('fragmented'), binary: false })
    ws.close()
  })

  test('backpressure, server to client: a client that does not read stops the server\'s socket; nothing is lost', async () => {
    const ws = await connect(`ws://127.0.0.1:${lb.port}/flood`)
    const got: number[] = []
    let bytes = 0
    ws.on('message', (d: Buffer) => { got.push(d.readUInt32BE(0)); bytes += d.length })
    let closedWith = ''
    ws.on('close', (code: number, reason: Buffer) => { closedWith = `${code} ${reason.toString()}` + closedWith })
    // a frame the client rejects shows as 1006 on its side: say why
    ws.on('error', (err: Error) => { closedWith += ` (client error: ${err.message})` })
    ws.pause() // the client stops reading its socket
    ws.send('go')
    // long enough for a balancer that kept reading to take most of the 64 MiB, and well inside
    // timeouts.tunnel (3 s): a session that moves no byte that long is closed as idle
    await sleep(1000) // the thing tested: nothing is read for 1 s, and the balancer must not take the server's data meanwhile
    const server = flood.sockets.at(-1)!
    // 64 MiB were sent; kernel socket buffers hold some, and the balancer only HIGH_WATER + one read:
    // the rest must still be waiting in the server, i.e. the balancer stopped reading from it
    assert.ok(server.bufferedAmount > 24 * 1024 * 1024, `server still holds ${server.bufferedAmount} bytes`)
    assert.equal(got.length, 0)
    ws.resume()
    await waitFor(() => got.length === 256 || closedWith !== '', 'all 256 messages', 20_000, 10)
    assert.equal(got.length, 256, `messages received before the session closed with ${closedWith}; lb's log ends: ${lb.log().slice(-1500)}`)
    assert.deepEqual(got, Array.from({ length: 256 }, (_, i) => i), 'in order')
    assert.equal(bytes, 256 * 256 * 1024)
    ws.close()
  })

  test('backpressure, client to server: past twice websocket_max_message waiting for the server, 1013; bigger messages close', async () => {
    const ws = await connect(`ws://127.0.0.1:${small}/stall`)
    const done = closed(ws)
    const chunk = Buffer.alloc(60 * 1024, 1)
    for (let i = 0; i < 800 && ws.readyState === ws.OPEN; i++) {
      ws.send(chunk)
      if (i % 50 === 0) await sleep(5) // the client's pacing: let the close of a refused session arrive between writes
    }
    const c = await done
    assert.equal(c.code, 1013)
    assert.equal(c.reason, 'server too slow')
    const refused = /LB_ERR_WS_BACKPRESSURE|more than 131072 bytes from the client waited/
    assert.match(await lb.logMatching(refused), refused)

    const ws2 = await connect(`ws://127.0.0.1:${small}/ws`)
    ws2.send('name?')
    const e = (await nextMessage(ws2)).data.toString() === 'e1' ? e1 : e2
    const n = e.events.length
    const done2 = closed(ws2)
    ws2.send(Buffer.alloc(64 * 1024 + 1))
    // uWS closes at once, without a close frame (docs/tls-ws-tcp.md); the server's connection goes the same way
    assert.equal((await done2).code, 1006)
    await waitFor(() => e.events.slice(n).some((x) => x.startsWith('close:1006')), 'the server to see 1006', 2000, 10)
  })

  test('close codes and reasons pass both ways; abrupt closes stay abrupt', async () => {
    const open = async (): Promise<[WebSocket, WsEcho, WebSocket]> => {
      const ws = await connect(`ws://127.0.0.1:${lb.port}/ws`)
      ws.send('name?')
      const e = (await nextMessage(ws)).data.toString() === 'e1' ? e1 : e2
      return [ws, e, e.sockets.at(-1)!]
    }
    let [ws, e, server] = await open()
    ws.close(4001, 'bye from client')
    assert.deepEqual(await closed(ws), { code: 4001, reason: 'bye from client' })
    await waitFor(() => e.events.includes('close:4001:bye from client'), 'the server to see 4001', 2000, 10)

    ;[ws, e, server] = await open()
    server.close(4002, 'bye from server')
    assert.deepEqual(await closed(ws), { code: 4002, reason: 'bye from server' })

    ;[ws, e, server] = await open()
    server.close()
    assert.deepEqual(await closed(ws), { code: 1005, reason: '' }, 'a close frame without a code stays without one')

    ;[ws, e, server] = await open()
    server.terminate()
    assert.equal((await closed(ws)).code, 1006)

    ;[ws, e, server] = await open()
    const n = e.events.length
    ws.terminate()
    await waitFor(() => e.events.slice(n).some((x) => x.startsWith('close:1006')), 'the server to see 1006', 2000, 10)
  })

  test('pings pass through both ways', async () => {
    const ws = await connect(`ws://127.0.0.1:${lb.port}/ws`)
    ws.send('name?')
    const e = (await nextMessage(ws)).data.toString() === 'e1' ? e1 : e2
    const server = e.sockets.at(-1)!
    const pinged = new Promise<string>((resolve) => ws.once('ping', (d: Buffer) => resolve(d.toString())))
    server.ping('from server')
    assert.equal(await pinged, 'from server')
    // the ws client answered it; the pong reaches the server
    await waitFor(() => e.events.includes('pong:from server'), 'the server to get its pong', 2000, 10)
    const ponged = new Promise<string>((resolve) => ws.once('pong', (d: Buffer) => resolve(d.toString())))
    ws.ping('from client')
    assert.equal(await ponged, 'from client')
    await waitFor(() => e.events.includes('ping:from client'), 'the server to see the client\'s ping', 2000, 10)
    ws.close()
  })

  test('upgrades are routed and balanced like requests: round robin, middlewares, refusals, failover', async () => {
    const names: string[] = []
    for (let i = 0; i < 4; i++) {
      const ws = await connect(`ws://127.0.0.1:${lb.port}/ws`)
      ws.send('name?')
      names.push((await nextMessage(ws)).data.toString())
      ws.close()
    }
    assert.deepEqual([...names].sort(), ['e1', 'e1', 'e2', 'e2'])
    // a middleware answers instead of upgrading (ipAllowList: 403)
    await assert.rejects(connect(`ws://127.0.0.1:${lb.port}/denied`), (err: Error & { status?: number }) => err.status === 403)
    // the server's refusal reaches the client as its HTTP answer
    await assert.rejects(connect(`ws://127.0.0.1:${lb.port}/refuse`), (err: Error & { status?: number, headers?: Record<string, string> }) =>
      err.status === 404 && err.headers?.['x-refused-by'] === 'refusing')
    // a server that refuses connections is skipped (retries = 1)
    for (let i = 0; i < 3; i++) {
      const ws = await connect(`ws://127.0.0.1:${lb.port}/failover`)
      ws.send('name?')
      assert.equal((await nextMessage(ws)).data.toString(), 'e1')
      ws.close()
    }
    // every upgrade so far was made late (after the server's 101), inside a cork: uWS printed no warning
    assert.doesNotMatch(lb.log() + lb.stdout(), /Warning: uWS/)
  })

  test('mTLS entry point: WebSockets work with a client certificate', async () => {
    const tlsOpts = { ca: readFileSync(certs.ca), cert: readFileSync(certs.client.cert), key: readFileSync(certs.client.key) }
    const ws = await connect(`wss://localhost:${mtls}/ws`, tlsOpts)
    ws.send('over mtls')
    assert.equal((await nextMessage(ws)).data.toString(), 'over mtls')
    ws.close()
    await assert.rejects(connect(`wss://localhost:${mtls}/ws`, { ca: readFileSync(certs.ca) }))
  })

  test('idle time-out (timeouts.tunnel): traffic keeps a session open, silence closes both sides with 1001', async () => {
    const ws = await connect(`ws://127.0.0.1:${lb.port}/ws`)
    ws.send('name?')
    const e = (await nextMessage(ws)).data.toString() === 'e1' ? e1 : e2
    const n = e.events.length
    for (let i = 0; i < 6; i++) {
      await sleep(800) // the pacing is the thing tested: 4.8 s in all, longer than the 3 s time-out, but never 3 s of silence
      ws.send('tick')
      await nextMessage(ws)
    }
    const t0 = Date.now()
    const c = await closed(ws)
    const waited = Date.now() - t0
    assert.deepEqual(c, { code: 1001, reason: 'idle timeout' })
    assert.ok(waited > 2500 && waited < 5000, `closed after ${waited} ms of silence`)
    await waitFor(() => e.events.slice(n).includes('close:1001:idle timeout'), 'the server to see 1001', 2000, 10)
  })

  test('a reload does not cut established WebSockets; new ones follow the new configuration', async () => {
    const before1: WebSocket[] = []
    for (let i = 0; i < 2; i++) before1.push(await connect(`ws://127.0.0.1:${lb.port}/ws`))
    lb.write(config([e2.address]))
    lb.reload()
    await waitFor(() => /"generation":2/.test(lb.log()), 'generation 2', 5000, 10)
    for (const ws of before1) {
      ws.send('after reload')
      assert.equal((await nextMessage(ws)).data.toString(), 'after reload')
    }
    for (let i = 0; i < 2; i++) {
      const ws = await connect(`ws://127.0.0.1:${lb.port}/ws`)
      ws.send('name?')
      assert.equal((await nextMessage(ws)).data.toString(), 'e2')
      ws.close()
    }
    for (const ws of before1) ws.close()
  })
})
