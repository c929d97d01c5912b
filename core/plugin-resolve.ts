// Hands lb's own "lb/plugin" to every module that imports it, however lb was
// installed. A third-party plugin lives outside lb's folder (next to a config,
// in a plugins folder, in another node_modules), where Node's own search would
// find no `lb` package, or another copy of it: with a global install there is
// none on the plugin's path at all. One resolve hook answers "lb/plugin" with
// this lb's module, so every plugin shares the running lb's clock, rate table
// classes and API version. Registered once per thread, before the first
// plugin module is imported (plugins/index.ts).
import * as nodeModule from 'node:module'

const API_URL = new URL('./plugin-api.js', import.meta.url).href
export const PLUGIN_SPECIFIER = 'lb/plugin'

let provided = false

export function providePluginApi (): void {
  if (provided) return
  provided = true
  // module.register (Node 20.6 and later; the hook runs on Node's loader thread) exists on every Node lb
  // supports; registerHooks (in-thread, still experimental) only where register is gone
  const m = nodeModule as typeof nodeModule & { registerHooks?: (hooks: { resolve: unknown }) => unknown }
  if (typeof m.register === 'function') {
    m.register('./plugin-resolve-hook.js', import.meta.url, { data: { url: API_URL, specifier: PLUGIN_SPECIFIER } })
  } else if (typeof m.registerHooks === 'function') {
    m.registerHooks({
      resolve: (specifier: string, context: unknown, next: (s: string, c: unknown) => unknown) =>
        specifier === PLUGIN_SPECIFIER ? { url: API_URL, shortCircuit: true } : next(specifier, context),
    })
  }
}
