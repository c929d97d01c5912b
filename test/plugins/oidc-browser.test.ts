// The oidc login in headless Chromium, as a user goes through it: a page
// behind the middleware sends the browser to the provider (oidc-provider on
// loopback), the user fills in its login form, and the browser lands back on
// the page with the backend seeing the forwarded claims; the session cookie is
// HttpOnly (page scripts cannot read it) and logout ends the session.
import { strict as assert } from 'node:assert'
import { test } from 'node:test'
import { requireTool, waitLog } from '../admin/util.js'
import { connect, startChromium, stopChromium } from '../chromium.js'
import { freePort, request, sleep, startLb } from '../helpers.js'
import { echo, secrets, startIdp } from './oidc-idp.js'
import { mwConfig } from './setup.js'

test('oidc login in headless Chromium: provider form, back to the page with the claims, logout', { timeout: 90_000 }, async (t) => {
  const bin = requireTool(t, 'chromium', 'chromium')
  if (bin === null) return
  const backend = await echo()
  const idpPort = await freePort()
  const issuer = `http://127.0.0.1:${idpPort}`
  const lb = await startLb(mwConfig(backend.address, `[middlewares.sso]\ntype = "oidc"\nissuer = "${issuer}"\n${secrets().toml}\n`, { '/': ['sso'] }), { workers: 1 }) // one worker: the one whose metadata the wait below sees
  const idp = await startIdp({ lb: lb.url, port: idpPort })
  t.after(async () => { await lb.stop(); await idp.close(); await backend.close() })
  await waitLog(lb, /"msg":"identity provider unavailable"/) // the first discovery ran before the provider started; the retry finds it
  for (const end = Date.now() + 15_000; (await request(`${lb.url}/`)).status !== 302;) {
    if (Date.now() > end) assert.fail('the middleware never loaded the provider')
    await sleep(100)
  }
  const chrome = await startChromium(bin)
  t.after(() => stopChromium(chrome))
  const cdp = await connect(chrome.port, `${lb.url}/welcome?from=chromium`)
  t.after(() => cdp.close())
  const evaluate = async (expression: string): Promise<unknown> =>
    ((await cdp.call('Runtime.evaluate', { expression, returnByValue: true })).result as { value?: unknown } | undefined)?.value
  const until = async (what: string, expression: string): Promise<unknown> => {
    for (const end = Date.now() + 20_000; ;) {
      const v = await evaluate(expression)
      if (v !== undefined && v !== null && v !== false) return v
      if (Date.now() > end) assert.fail(`timed out waiting for ${what}; at ${String(await evaluate('location.href'))}`)
      await sleep(100)
    }
  }

  await until('the provider\'s login form', `location.origin === ${JSON.stringify(issuer)} && document.querySelector('input[name=login]') !== null`)
  await evaluate(`(() => {
    document.querySelector('input[name=login]').value = 'gina'
    document.querySelector('input[name=password]').value = 'secret'
    document.querySelector('form').submit()
  })()`)
  const body = await until('the page behind the middleware', `location.href === ${JSON.stringify(`${lb.url}/welcome?from=chromium`)} && document.body && document.body.innerText.includes('x-auth-request-user') && document.body.innerText`)
  const seen = JSON.parse(String(body)) as { path: string, headers: Record<string, string> }
  assert.equal(seen.path, '/welcome?from=chromium')
  assert.equal(seen.headers['x-auth-request-user'], 'gina')
  assert.equal(seen.headers['x-auth-request-email'], 'gina@example.com')
  assert.equal(await evaluate('document.cookie'), '', 'the session cookie is HttpOnly')
  const cookies = (await cdp.call('Network.getCookies', { urls: [lb.url] })).cookies as Array<{ name: string, httpOnly: boolean, sameSite: string }>
  const session = cookies.find((c) => c.name === '_lb_oidc')
  assert.ok(session !== undefined, JSON.stringify(cookies))
  assert.equal(session.httpOnly, true)
  assert.equal(session.sameSite, 'Lax')

  // logout: the provider's end-session page (it asks to confirm), and the session is gone
  await evaluate(`location.href = ${JSON.stringify(`${lb.url}/oauth2/sign_out`)}`)
  await until('the provider\'s logout page', `location.origin === ${JSON.stringify(issuer)} && location.pathname.startsWith('/session/end')`)
  // looked for until it is gone (5 s at most): once in CI (Node 22) the cookie was still listed at the first look
  // with the provider's page already on, and the same run passed on Node 20 and four times here
  let after: Array<{ name: string }> = []
  for (const end = Date.now() + 5000; ; await sleep(50)) {
    after = (await cdp.call('Network.getCookies', { urls: [lb.url] })).cookies as Array<{ name: string }>
    if (after.every((c) => c.name !== '_lb_oidc') || Date.now() > end) break
  }
  assert.equal(after.find((c) => c.name === '_lb_oidc'), undefined)
})
