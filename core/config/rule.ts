// Router rules in Traefik's syntax: matchers Host(`a`, ...), PathPrefix(`/p`, ...),
// Path(`/p`, ...) combined with &&, || and parentheses; && binds tighter than ||.
// Parsed once at config load into a small tree; the router compiles the tree
// into a closure (core/worker/router.ts).

export type Rule =
  | { readonly op: 'host', readonly values: readonly string[] }
  | { readonly op: 'pathPrefix', readonly values: readonly string[] }
  | { readonly op: 'path', readonly values: readonly string[] }
  | { readonly op: 'and' | 'or', readonly left: Rule, readonly right: Rule }

const MATCHERS: Record<string, 'host' | 'pathPrefix' | 'path'> = { Host: 'host', PathPrefix: 'pathPrefix', Path: 'path' }

/** Parses a rule; throws an Error whose message says where and what is wrong. */
export function parseRule (src: string): Rule {
  let i = 0
  const ws = (): void => { while (i < src.length && src[i] === ' ') i++ }
  const fail = (what: string): never => { throw new Error(`${what} at column ${i + 1} of rule ${JSON.stringify(src)}`) }

  const matcher = (): Rule => {
    ws()
    if (src[i] === '(') {
      i++
      const r = or()
      ws()
      if (src[i] !== ')') fail('expected ")"')
      i++
      return r
    }
    const m = /^[A-Za-z]+/.exec(src.slice(i))
    if (m === null) return fail('expected a matcher (Host, PathPrefix, Path)')
    const op = MATCHERS[m[0]]
    if (op === undefined) return fail(`unknown matcher ${m[0]} (known: Host, PathPrefix, Path)`)
    i += m[0].length
    ws()
    if (src[i] !== '(') fail('expected "("')
    i++
    const values: string[] = []
    for (;;) {
      ws()
      const q = src[i]
      if (q !== '`' && q !== '"') fail('expected a `quoted` value')
      const end = src.indexOf(q!, i + 1)
      if (end < 0) fail('unterminated value')
      const v = src.slice(i + 1, end)
      if (op !== 'host' && !v.startsWith('/')) fail(`${m[0]} value must start with "/"`)
      if (op === 'host' && (v === '' || /[\s/]/.test(v))) fail('Host value must be a host name')
      // host names match case-insensitively and without the trailing dot of the fully qualified form (request-host.ts)
      values.push(op === 'host' ? v.toLowerCase().replace(/\.$/, '') : v)
      i = end + 1
      ws()
      if (src[i] === ',') { i++; continue }
      if (src[i] === ')') { i++; break }
      fail('expected "," or ")"')
    }
    return { op, values }
  }
  const and = (): Rule => {
    let left = matcher()
    for (;;) {
      ws()
      if (!src.startsWith('&&', i)) return left
      i += 2
      left = { op: 'and', left, right: matcher() }
    }
  }
  const or = (): Rule => {
    let left = and()
    for (;;) {
      ws()
      if (!src.startsWith('||', i)) return left
      i += 2
      left = { op: 'or', left, right: and() }
    }
  }
  const rule = or()
  ws()
  if (i < src.length) fail('unexpected text')
  return rule
}
