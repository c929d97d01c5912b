// For the oidc tests: a real OpenID provider (oidc-provider) on loopback with
// its development login form, and a plain HTTP client that browses like a
// browser would (a cookie jar per origin, redirects followed, forms posted).
//
// Clients at the provider: "lb" (the middleware's), "other" (another relying
// party with the same redirect URI, for tokens meant for someone else) and
// "api" (client credentials, whose access tokens are JWTs for audience "lb").
// Any login name with any password signs in: "ann" becomes ann@example.com in
// groups ["staff"], "admin@corp.test" is in ["admins", "staff"].
import { generateKeyPairSync, randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import Provider from 'oidc-provider'
import { type Backend, request, sleep, startBackend, tempDir } from '../helpers.js'

/** the cookie key of the middlewares under test (tests seal their own cookies with it) */
export const COOKIE_KEY = randomBytes(32)

/** secrets in files, as the middleware reads them */
export function secrets (): { dir: string, toml: string } {
  const dir = tempDir('lb-oidc-')
  writeFileSync(join(dir, 'client-secret'), 'lb-secret\n')
  writeFileSync(join(dir, 'cookie-secret'), COOKIE_KEY.toString('base64') + '\n')
  return { dir, toml: `client_id = "lb"\nclient_secret_file = "${join(dir, 'client-secret')}"\ncookie_secret_file = "${join(dir, 'cookie-secret')}"` }
}

export function echo (): Promise<Backend> {
  return startBackend('web', (req, res) => {
    req.resume()
    req.on('end', () => res.end(JSON.stringify({ path: req.url, headers: req.headers })))
  })
}

export const seen = (body: string): Record<string, string> => (JSON.parse(body) as { headers: Record<string, string> }).headers

/**
 * Waits until every worker of the lb at `url` answers `status` to a request without a session (302: it
 * loaded the provider; 503: it knows the provider is away): STREAK in a row, each on a connection of its
 * own, which the kernel spreads over the workers at random. Returns the last answer.
 */
/**
 * Answers in a row that everyWorker asks for. With 2 workers, the chance that every one of n connections reached
 * the same worker is 2 × 2^-n: 1 in 512 for the 10 it was, enough to fail a CI run (a worker still waiting out
 * its back-off answered 503 after ten 302s); 1 in 500 million for 30.
 */
const STREAK = 30

export async function everyWorker (url: string, status: number, ms = 15_000): Promise<Awaited<ReturnType<typeof request>>> {
  let last = await request(url)
  for (let streak = 0, end = Date.now() + ms; streak < STREAK; streak = last.status === status ? streak + 1 : 0) {
    if (Date.now() > end) throw new Error(`the workers of ${url} do not all answer ${status}: ${last.status} ${last.body}`)
    await sleep(20)
    last = await request(url)
  }
  return last
}

export interface Idp {
  readonly issuer: string
  readonly port: number
  /** grant types the token endpoint served, in order ("authorization_code", "refresh_token", ...) */
  readonly grants: string[]
  /** discovery documents served so far */
  readonly discoveries: () => number
  /** key sets (jwks_uri) served so far */
  readonly keySets: () => number
  close (): Promise<void>
  /** an access token for client "api" (client credentials): a JWT for audience "lb" */
  apiToken (): Promise<string>
}

export interface IdpOptions {
  /** lb's origin (http://127.0.0.1:PORT): its callback and post-logout URIs are registered */
  readonly lb: string
  readonly port?: number
  /** access token lifetime, seconds. Default: 3600 */
  readonly accessTtl?: number
  /** the provider's signing keys (private JWKs). Default: oidc-provider's development keys */
  readonly keys?: ReadonlyArray<Record<string, unknown>>
}

/** A private RSA signing key as a JWK, named `kid` */
export function signingKey (kid: string): Record<string, unknown> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  return { ...privateKey.export({ format: 'jwk' }), kid, use: 'sig', alg: 'RS256' }
}

export async function startIdp (o: IdpOptions): Promise<Idp> {
  const server = http.createServer()
  await new Promise<void>((resolve) => server.listen(o.port ?? 0, '127.0.0.1', resolve))
  const port = (server.address() as AddressInfo).port
  const issuer = `http://127.0.0.1:${port}`
  const rp = (id: string): Record<string, unknown> => ({
    client_id: id, client_secret: `${id}-secret`, redirect_uris: [`${o.lb}/oauth2/callback`, `${o.lb}/admin/oauth2/callback`], post_logout_redirect_uris: [`${o.lb}/`],
    grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
  })
  const provider = new Provider(issuer, {
    clients: [rp('lb'), rp('other'), { client_id: 'api', client_secret: 'api-secret', grant_types: ['client_credentials'], response_types: [], redirect_uris: [] }],
    findAccount: (_ctx: unknown, id: string) => ({
      accountId: id,
      claims: () => ({ sub: id, email: id.includes('@') ? id : `${id}@example.com`, email_verified: true, groups: id.startsWith('admin') ? ['admins', 'staff'] : ['staff'] }),
    }),
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['groups'] },
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (ctx: { oidc: { client?: { clientId: string } } }) => (ctx.oidc.client?.clientId === 'api' ? 'urn:lb' : undefined),
        getResourceServerInfo: () => ({ audience: 'lb', accessTokenFormat: 'jwt', accessTokenTTL: 300, scope: 'api' }),
        useGrantedResource: () => true,
      },
    },
    // first-party clients: the grant is given without a consent page
    loadExistingGrant: async (ctx: any) => {
      const id = ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId)
      if (id !== undefined) return ctx.oidc.provider.Grant.find(id)
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId })
      grant.addOIDCScope('openid email profile offline_access')
      await grant.save()
      return grant
    },
    issueRefreshToken: () => true,
    ttl: { AccessToken: o.accessTtl ?? 3600, AuthorizationCode: 60, IdToken: 3600, Interaction: 600, Grant: 86400, Session: 86400, RefreshToken: 86400, ClientCredentials: 300 },
    cookies: { keys: ['lb-oidc-test'] },
    ...(o.keys !== undefined ? { jwks: { keys: o.keys } } : {}),
  })
  const grants: string[] = []
  provider.on('grant.success', (ctx: { oidc: { params?: { grant_type?: string } } }) => { grants.push(String(ctx.oidc.params?.grant_type)) })
  let discoveries = 0
  let keySets = 0
  server.on('request', (req: http.IncomingMessage) => {
    if (req.url === '/.well-known/openid-configuration') discoveries++
    else if (req.url === '/jwks') keySets++
  })
  server.on('request', provider.callback())
  return {
    issuer,
    port,
    grants,
    discoveries: () => discoveries,
    keySets: () => keySets,
    apiToken: async () => {
      // a connection of its own: a pooled one may still point at a provider restarted on the same port
      const r = await request(`${issuer}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from('api:api-secret').toString('base64')}` },
        body: 'grant_type=client_credentials&scope=api',
      })
      return (JSON.parse(r.body) as { access_token: string }).access_token
    },
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    }),
  }
}

export interface Page {
  readonly status: number
  readonly url: string
  readonly headers: Headers
  readonly body: string
}

/** A browser without a browser: cookies by origin (names only, no path rules needed here), redirects followed, forms posted. */
export class Client {
  readonly jar = new Map<string, Map<string, string>>()
  /** every URL visited, in order */
  readonly visited: string[] = []

  cookie (origin: string, name: string): string | undefined {
    return this.jar.get(origin)?.get(name)
  }

  setCookie (origin: string, name: string, value: string): void {
    const m = this.jar.get(origin) ?? new Map<string, string>()
    m.set(name, value)
    this.jar.set(origin, m)
  }

  /** One request, no redirect followed; stores the cookies it sets. */
  async fetch (url: string, init: { method?: string, body?: string, headers?: Record<string, string> } = {}): Promise<Page> {
    const u = new URL(url)
    const jar = this.jar.get(u.origin)
    const headers: Record<string, string> = { ...init.headers }
    if (jar !== undefined && jar.size > 0) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ')
    if (init.body !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded'
    this.visited.push(url)
    const r = await fetch(url, { method: init.method ?? 'GET', body: init.body, headers, redirect: 'manual' })
    for (const c of r.headers.getSetCookie()) {
      const [pair, ...attrs] = c.split(';')
      const eq = pair!.indexOf('=')
      const name = pair!.slice(0, eq).trim()
      const value = pair!.slice(eq + 1).trim()
      const gone = attrs.some((a) => /^\s*max-age=0\s*$/i.test(a) || /^\s*expires=thu, 01 jan 1970/i.test(a))
      const m = this.jar.get(u.origin) ?? new Map<string, string>()
      if (gone) m.delete(name)
      else m.set(name, value)
      this.jar.set(u.origin, m)
    }
    return { status: r.status, url, headers: r.headers, body: await r.text() }
  }

  /** Follows redirects (at most 10) from `url`; stops at `stopAt` (a URL prefix) without requesting it. */
  async go (url: string, init: { method?: string, body?: string, headers?: Record<string, string> } = {}, stopAt = ''): Promise<Page> {
    let page = await this.fetch(url, init)
    for (let i = 0; i < 10 && page.status >= 300 && page.status < 400; i++) {
      const next = new URL(page.headers.get('location')!, page.url).href
      if (stopAt !== '' && next.startsWith(stopAt)) return { ...page, url: next }
      page = await this.fetch(next)
    }
    return page
  }

  /** Fills and posts the provider's login form on `page`; returns where the redirects end. */
  async signIn (page: Page, login: string, stopAt = ''): Promise<Page> {
    const form = /<form[^>]*action="([^"]+)"[^>]*method="post"[^>]*>([\s\S]*?)<\/form>/.exec(page.body)
    if (form === null) throw new Error(`no login form at ${page.url}: ${page.status} ${page.body.slice(0, 300)}`)
    const fields = new URLSearchParams()
    for (const m of form[2]!.matchAll(/<input[^>]*type="hidden"[^>]*name="([^"]+)"[^>]*value="([^"]*)"/g)) fields.set(m[1]!, m[2]!)
    fields.set('login', login)
    fields.set('password', 'any')
    return this.go(new URL(form[1]!, page.url).href, { method: 'POST', body: fields.toString() }, stopAt)
  }
}
