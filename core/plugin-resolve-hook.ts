// The resolve hook core/plugin-resolve.ts registers with module.register: it
// runs on Node's module loader thread, so it takes the URL of lb's "lb/plugin" as data instead of importing anything of lb.
import type { InitializeHook, ResolveHook } from 'node:module'

let api = ''
let specifierOf = ''

export const initialize: InitializeHook<{ url: string, specifier: string }> = (data) => {
  api = data.url
  specifierOf = data.specifier
}

export const resolve: ResolveHook = async (specifier, context, next) =>
  specifier === specifierOf ? { url: api, shortCircuit: true } : await next(specifier, context)
