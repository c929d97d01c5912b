// Sticky sessions by cookie ([services.X.sticky.cookie], Traefik's sticky.cookie,
// HAProxy's `cookie insert`), through the real balancer with two workers and
// three real backends that serve HTTP and WebSocket. A client without the cookie
// gets one naming the server it reached; with it, every request (on new
// connections, so both workers answer) reaches that server, over HTTP/1.1,
// HTTP/2 and WebSocket; when the server is drained, in maintenance or down, the
// client moves and gets a new cookie. The cookie's attributes are the
// configured ones; a forged value is ignored; the dashboard API shows it as
// Traefik's does.
import { strict as assert } from 'node:assert'
import http2 from 'node:http2'
import { after, before, describe, test } from 'node:test'
import { request } from '../helpers.js'
import { type AdminLb, sock, startAdminLb } from '../admin/util.js'
import { type WsEcho, connect, nextMessage, startWsEcho } from '../ws/echo.js'
import { problems } from '../plugins/setup.js'

const config = (sticky: string, servers = 'address = "127.0.0.1:1"\ncheck = false'): string => `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.r]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
${sticky}
[[services.web.servers]]
${servers}
`

describe('sticky.cookie: config validation', () => {
  test('names, attributes and where the table belongs', () => {
    assert.match(problems(config('[services.web.sticky]')), /services\.web\.sticky\.cookie: required in services\.web\.sticky/)
    assert.match(problems(config('[services.web.sticky.cookie]\nname = "a b"')), /services\.web\.sticky\.cookie\.name: expected a cookie name/)
    assert.match(problems(config('[services.web.sticky.cookie]\nsame_site = "loose"')), /services\.web\.sticky\.cookie\.same_site: expected one of "", "none", "lax", "strict"/)
    assert.match(problems(config('[services.web.sticky.cookie]\nsame_site = "none"')), /same_site: "none" needs secure = true/)
    assert.match(problems(config('[services.web.sticky.cookie]\nmax_age = -1')), /services\.web\.sticky\.cookie\.max_age: expected an integer from 0/)
    assert.match(problems(config('[services.web.sticky.cookie]\npath = "/a;b"')), /services\.web\.sticky\.cookie\.path: expected a path/)
    assert.match(problems(config('[services.web.sticky.cookie]\nhttpOnly = true')), /services\.web\.sticky\.cookie\.httpOnly: unknown key/)
  })
})

describe('sticky sessions through the balancer', () => {
  const names = ['s1', 's2', 's3']
  let backends: WsEcho[] = []
  let a: AdminLb
  const get = (headers: Record<string, string> = {}): ReturnType<typeof request> => request(a.lb.url, { path: '/', headers })
  const cookieOf = (setCookie: string[] | undefined): string => {
    assert.ok(setCookie !== undefined && setCookie.length === 1, `one Set-Cookie, got ${JSON.stringify(setCookie)}`)
    return setCookie[0]!.split(';')[0]!
  }

  before(async () => {
    backends = await Promise.all(names.map((n) => startWsEcho(n)))
    a = await startAdminLb('[global]\nworkers = 2\naccess_log = "off"\n\n' + config(`balance = "roundrobin"
[services.web.sticky.cookie]
name = "lb_srv"
secure = true
http_only = true
same_site = "lax"
max_age = 3600`, backends.map((b, i) => `name = "${names[i]!}"\naddress = "${b.address}"\ncheck = false`).join('\n[[services.web.servers]]\n'))
      .replace('[routers.r]', '[entrypoints.h2]\naddress = "127.0.0.1:0"\nprotocol = "h2c"\n[routers.r]'))
  })
  after(async () => {
    await a?.lb.stop()
    await Promise.all(backends.map((b) => b.close()))
  })

  test('no cookie: the answer pins the client to the server it reached, with the configured attributes', async () => {
    const r = await get()
    assert.equal(r.status, 200)
    const sc = r.headers['set-cookie']!
    assert.equal(sc.length, 1)
    assert.match(sc[0]!, /^lb_srv=[0-9a-f]{16}; Path=\/; Max-Age=3600; Secure; HttpOnly; SameSite=Lax$/)
    assert.ok(!sc[0]!.includes('127.0.0.1'), 'the value does not reveal the server address')
  })

  test('with the cookie: 30 requests on new connections (both workers) all reach the same server, and get no new cookie', async () => {
    const first = await get()
    const cookie = cookieOf(first.headers['set-cookie'])
    const server = first.body
    const rs = await Promise.all(Array.from({ length: 30 }, () => get({ cookie: `theme=dark; ${cookie}; other=1` })))
    assert.deepEqual([...new Set(rs.map((r) => r.body))], [server])
    assert.ok(rs.every((r) => r.headers['set-cookie'] === undefined))
    // without it, round robin spreads the same requests
    const spread = await Promise.all(Array.from({ length: 30 }, () => get()))
    assert.equal(new Set(spread.map((r) => r.body)).size, 3)
  })

  test('a forged or stale value is ignored: the client gets a server and a valid cookie', async () => {
    const r = await get({ cookie: 'lb_srv=0123456789abcdef' })
    assert.equal(r.status, 200)
    const cookie = cookieOf(r.headers['set-cookie'])
    assert.equal((await get({ cookie })).body, r.body)
    // a cookie whose name only ends like ours is another cookie
    const x = await get({ cookie: `xlb_srv=${cookie.split('=')[1]!}` })
    assert.ok(x.headers['set-cookie'] !== undefined)
  })

  test('HTTP/2 (h2c, one Cookie field per cookie as RFC 9113 allows) and WebSocket keep the same server', async () => {
    const first = await get()
    const cookie = cookieOf(first.headers['set-cookie'])
    const session = http2.connect(`http://127.0.0.1:${await a.lb.portOf('h2')}`)
    try {
      for (let i = 0; i < 5; i++) {
        const body = await new Promise<string>((resolve, reject) => {
          const s = session.request({ ':path': '/', cookie: ['a=1', cookie, 'b=2'] })
          let data = ''
          s.setEncoding('utf8')
          s.on('response', (h) => { assert.equal(h['set-cookie'], undefined) })
          s.on('data', (d: string) => { data += d })
          s.on('end', () => resolve(data))
          s.on('error', reject)
          s.end()
        })
        assert.equal(body, first.body)
      }
    } finally {
      session.close()
    }
    const ws = await connect(`ws://127.0.0.1:${a.lb.port}/`, { headers: { cookie } })
    ws.send('name?')
    assert.equal((await nextMessage(ws)).data.toString() + '\n', first.body)
    ws.close()
    // without the cookie, the 101 carries one naming the server the WebSocket reached
    const { WebSocket: Ws } = await import('ws')
    const ws2 = new Ws(`ws://127.0.0.1:${a.lb.port}/`)
    const upgraded = new Promise<string[] | undefined>((resolve) => ws2.once('upgrade', (res) => resolve(res.headers['set-cookie'])))
    await new Promise((resolve, reject) => { ws2.once('open', resolve); ws2.once('error', reject) })
    ws2.send('name?')
    const name = (await nextMessage(ws2)).data.toString()
    ws2.close()
    const again = await get({ cookie: cookieOf(await upgraded) })
    assert.equal(again.body, name + '\n')
  })

  test('drained, then in maintenance: the client moves to another server with a new cookie, and stays there', async () => {
    const first = await get()
    const cookie = cookieOf(first.headers['set-cookie'])
    const was = first.body.trim()
    assert.equal(await sock(a.sock, `set server web/${was} state drain`), '\n')
    const moved = await get({ cookie })
    assert.notEqual(moved.body.trim(), was)
    const newCookie = cookieOf(moved.headers['set-cookie'])
    assert.notEqual(newCookie, cookie)
    const rs = await Promise.all(Array.from({ length: 10 }, () => get({ cookie: newCookie })))
    assert.deepEqual([...new Set(rs.map((r) => r.body))], [moved.body])
    assert.equal(await sock(a.sock, `set server web/${was} state ready`), '\n')
    // back in rotation, the old cookie finds its server again
    assert.equal((await get({ cookie })).body.trim(), was)
  })

  test('the server down (connection refused): the request is retried elsewhere and the cookie moves with it', async () => {
    const first = await get()
    const cookie = cookieOf(first.headers['set-cookie'])
    const was = first.body.trim()
    const i = names.indexOf(was)
    await backends[i]!.close()
    try {
      const r = await get({ cookie })
      assert.equal(r.status, 200)
      assert.notEqual(r.body.trim(), was)
      const moved = cookieOf(r.headers['set-cookie'])
      assert.equal((await get({ cookie: moved })).body, r.body)
    } finally {
      backends[i] = await startWsEcho(was, {}, backends[i]!.port)
    }
  })

  test('the dashboard API shows sticky.cookie as Traefik\'s does', async () => {
    const s = JSON.parse((await request(`${a.dash}/api/http/services/web@file`)).body) as { loadBalancer: Record<string, unknown> }
    assert.deepEqual(s.loadBalancer.sticky, { cookie: { name: 'lb_srv', secure: true, httpOnly: true, sameSite: 'lax', maxAge: 3600, path: '/' } })
  })
})
