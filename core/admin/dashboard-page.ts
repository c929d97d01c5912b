// The /dashboard/ page: static files from core/admin/dashboard/ (no build
// step), read once at start. They sit beside the sources, not in dist/, so the
// folder is looked up from the compiled module's place first, then the source tree.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { Answer, Route, Surface } from './http-server.js'

const FILES = [['index.html', 'text/html; charset=utf-8'], ['app.js', 'text/javascript; charset=utf-8']] as const

export function pageDir (): string {
  const here = dirname(fileURLToPath(import.meta.url))
  const candidates = [join(here, 'dashboard'), resolve(here, '..', '..', '..', 'core', 'admin', 'dashboard')]
  const found = candidates.find((d) => existsSync(join(d, 'index.html')))
  if (found === undefined) throw new Error(`dashboard page files not found in ${candidates.join(' or ')}`)
  return found
}

/** Error answers of the dashboard listener's own surfaces: plain text, as Traefik's router writes them. */
export const TEXT_ERRORS: Pick<Surface, 'notFound' | 'methodNotAllowed' | 'internalError'> = {
  notFound: () => ({ status: 404, text: '404 page not found\n' }),
  methodNotAllowed: () => ({ status: 405, text: '405 method not allowed\n' }),
  internalError: (err) => ({ status: 500, text: `${err.message}\n` }),
}

export function dashboardPage (): Surface {
  const dir = pageDir()
  const files = new Map<string, { text: string, type: string }>(FILES.map(([name, type]) => [name, { text: readFileSync(join(dir, name), 'utf8'), type }]))
  const file = (name: string): Answer => {
    const f = files.get(name)!
    return { status: 200, text: f.text, contentType: f.type, headers: { 'cache-control': 'no-cache' } }
  }
  const redirect: Answer = { status: 302, text: '', headers: { location: '/dashboard/' } }
  const routes: Route[] = [
    { method: 'GET', path: '/', help: 'redirects to /dashboard/', mutates: false, handler: () => redirect },
    { method: 'GET', path: '/dashboard', help: 'redirects to /dashboard/', mutates: false, handler: () => redirect },
    { method: 'GET', path: '/dashboard/', help: 'the dashboard page: routers, services, request rate, errors, latency', mutates: false, handler: () => file('index.html') },
    { method: 'GET', path: '/dashboard/app.js', help: 'the dashboard script', mutates: false, handler: () => file('app.js') },
  ]
  return {
    name: 'dashboard page',
    routes,
    ...TEXT_ERRORS,
  }
}
