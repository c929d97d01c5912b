// A requested model's chain: the name served for it (an alias resolved), then
// its fallbacks, each resolved, none twice. Config only ([generation.aliases],
// [generation.fallbacks]): the registry (control plane) and a data-plane
// worker's relay (core/gen/edge/) compute the same chain from the same config.

type Aliases = Readonly<Record<string, string>>
type Fallbacks = Readonly<Record<string, readonly string[]>>

/** The name served for a requested one (an alias' target, else the name itself). */
export const resolveAlias = (aliases: Aliases, model: string): string => Object.hasOwn(aliases, model) ? aliases[model]! : model

/** The requested model and its fallbacks, in the order they are tried. */
export function modelChain (aliases: Aliases, fallbacks: Fallbacks, model: string): string[] {
  const first = resolveAlias(aliases, model)
  const out = [first]
  const more = Object.hasOwn(fallbacks, first) ? fallbacks[first]! : Object.hasOwn(fallbacks, model) ? fallbacks[model]! : []
  for (const f of more) {
    const n = resolveAlias(aliases, f)
    if (!out.includes(n)) out.push(n)
  }
  return out
}
