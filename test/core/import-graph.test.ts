// The layers keep their shape: over the compiled import graph of core/ and
// plugins/ (each module's .js for its runtime imports and its .d.ts for its
// type imports, which the .js no longer shows), no module imports itself
// through others, and no arrow goes where docs/architecture.md says it may not.
import assert from 'node:assert/strict'
import { readFileSync, readdirSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { test } from 'node:test'
import { ROOT } from '../helpers.js'

const DIST = join(ROOT, 'dist')
const SPEC = /^\s*(?:import|export)\s[^'";]*?\sfrom\s+['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm

/** module (path under dist/ without extension) → what it imports: other modules the same way, or bare specifiers */
function graph (): Map<string, Set<string>> {
  const g = new Map<string, Set<string>>()
  for (const top of ['core', 'plugins']) {
    for (const f of readdirSync(join(DIST, top), { recursive: true, encoding: 'utf8' })) {
      const m = /^(.*)\.(js|d\.ts)$/.exec(f)
      if (m === null) continue
      const mod = join(top, m[1]!)
      const out = g.get(mod) ?? new Set<string>()
      g.set(mod, out)
      for (const s of readFileSync(join(DIST, top, f), 'utf8').matchAll(SPEC)) {
        const spec = s[1] ?? s[2] ?? s[3]!
        out.add(spec.startsWith('.') ? relative(DIST, resolve(DIST, dirname(mod), spec)).replace(/\.js$/, '') : spec)
      }
    }
  }
  return g
}

/** every circle, as the modules on it (Tarjan's strongly connected components of more than one module, or a self-import) */
function circles (g: Map<string, Set<string>>): string[][] {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const out: string[][] = []
  const visit = (v: string): void => {
    index.set(v, next); low.set(v, next); next++
    stack.push(v); onStack.add(v)
    for (const w of g.get(v) ?? []) {
      if (!g.has(w)) continue
      if (!index.has(w)) { visit(w); low.set(v, Math.min(low.get(v)!, low.get(w)!)) } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!))
    }
    if (low.get(v) !== index.get(v)) return
    const scc: string[] = []
    let w: string
    do { w = stack.pop()!; onStack.delete(w); scc.push(w) } while (w !== v)
    if (scc.length > 1 || g.get(v)!.has(v)) out.push(scc.sort())
  }
  for (const v of g.keys()) if (!index.has(v)) visit(v)
  return out
}

const layer = (mod: string): string => mod.startsWith('plugins/') ? 'plugins' : /^core\/([^/]+)\//.exec(mod)?.[1] ?? 'core'

/** core modules that import nothing of lb (or only each other): any layer may use them */
const LEAVES = new Set(['core/errors', 'core/clock', 'core/log'])

/** The arrows a layer may not draw (docs/architecture.md, "Layers"). */
function forbidden (from: string, to: string): string {
  const a = layer(from)
  if (from.startsWith('plugins/')) {
    if (to === 'lb/plugin' || !to.startsWith('core/')) return ''
    // the registry may make lb/plugin resolvable for the modules it imports; nothing else of core
    return from === 'plugins/index' && to === 'core/plugin-resolve' ? '' : 'a plugin imports core only through lb/plugin'
  }
  if (!to.startsWith('core/') && !to.startsWith('plugins/')) return ''
  const b = layer(to)
  // but core/gen/edge/, generation's part that runs in the data plane (a remote model's reply relayed in the worker)
  if (a === 'worker' && (b === 'admin' || (b === 'gen' && !to.startsWith('core/gen/edge/')))) return `the data plane does not depend on ${b}`
  if ((a === 'admin' || a === 'gen') && b === 'worker') return `${a} runs in the control plane: it does not import the data plane`
  if (a === 'upstream' && ['worker', 'admin', 'gen', 'control'].includes(b)) return `upstream sits below ${b}`
  if (a === 'shm' && !(b === 'shm' || b === 'config' || LEAVES.has(to))) return 'shared memory imports only the config types and the leaf modules'
  // core/config/capacity.ts checks a config against the shared memory's fixed sizes (core/shm/layout.ts)
  if (a === 'config' && !(b === 'config' || b === 'net' || b === 'auth' || to === 'core/shm/layout' || LEAVES.has(to))) return `the config layer is handed what ${b} checks, it does not import it`
  return ''
}

test('import graph: no circles among the modules of core/ and plugins/, types included', () => {
  const g = graph()
  assert.ok(g.size > 100 && g.has('core/worker/dataplane') && g.has('plugins/index'), 'dist/ is built')
  assert.deepEqual(circles(g), [])
})

test('import graph: no forbidden arrows (worker→admin/gen but gen/edge, shm→above, config→upper layers, plugins→core internals, upstream→above, admin/gen→worker)', () => {
  const bad: string[] = []
  for (const [from, tos] of graph()) {
    for (const to of tos) {
      const why = forbidden(from, to)
      if (why !== '') bad.push(`${from} → ${to}: ${why}`)
    }
  }
  assert.deepEqual(bad, [])
})

test('import graph: every built-in plugin imports lb/plugin, which resolves to core/plugin-api in this package', () => {
  const g = graph()
  // the plugins the registry lists; their helper modules beside them (plugins/oidc-cookie) may import
  // lb/plugin or not, and never core by another way (the forbidden-arrows test)
  const registered = [...g.get('plugins/index')!].filter((m) => m.startsWith('plugins/'))
  assert.ok(registered.length >= 8, registered.join(', '))
  for (const mod of registered) assert.ok(g.get(mod)!.has('lb/plugin'), `${mod} imports lb/plugin`)
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, { default: string, types: string }> }
  assert.equal(pkg.exports['./plugin']?.default, './dist/core/plugin-api.js')
  assert.equal(pkg.exports['./plugin']?.types, './dist/core/plugin-api.d.ts')
})

test('import graph: only the uWS engine (core/worker/transport/uws/) imports uWebSockets.js, types included', () => {
  const users = [...graph()].filter(([, tos]) => tos.has('uWebSockets.js')).map(([mod]) => mod)
  assert.ok(users.length > 0)
  assert.deepEqual(users.filter((m) => !m.startsWith('core/worker/transport/uws/')), [])
})

test('import graph: in the data plane only the node engine (core/worker/transport/node/) uses node:http or node:https and ws', () => {
  // response-head takes node:http's STATUS_CODES table, no server API
  const users = [...graph()].filter(([mod, tos]) => mod.startsWith('core/worker/') && mod !== 'core/worker/transport/response-head' &&
    (tos.has('node:http') || tos.has('node:https') || tos.has('ws'))).map(([mod]) => mod)
  assert.deepEqual([...new Set(users)].sort(), ['client', 'engine', 'ws'].map((f) => `core/worker/transport/node/${f}`))
})

test('import graph: node:http2 is imported by one server module (transport/h2/h2) and one client module (upstream/h2-pool)', () => {
  const users = [...graph()].filter(([, tos]) => tos.has('node:http2')).map(([mod]) => mod)
  assert.deepEqual([...new Set(users)].sort(), ['core/upstream/h2-pool', 'core/worker/transport/h2/h2'])
})

/** Past this, a file holds more than one concept: split it by concept (docs/architecture.md). */
const MAX_LINES = 400

test(`every source file under core/ and plugins/ has at most ${MAX_LINES} lines`, () => {
  const long: string[] = []
  for (const top of ['core', 'plugins']) {
    for (const f of readdirSync(join(ROOT, top), { recursive: true, encoding: 'utf8' })) {
      if (!/\.(ts|js|mjs)$/.test(f)) continue
      const lines = readFileSync(join(ROOT, top, f), 'utf8').split('\n').length - 1
      if (lines > MAX_LINES) long.push(`${top}/${f}: ${lines} lines`)
    }
  }
  assert.deepEqual(long, [])
})
