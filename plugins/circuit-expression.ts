// The expression of a circuitBreaker, as Traefik's (vulcand/oxy's predicates):
// NetworkErrorRatio(), ResponseCodeRatio(from, to, dividedByFrom, dividedByTo)
// and LatencyAtQuantileMS(q) compared with a number (> < >= <= == !=), joined by
// && and ||, with parentheses. Parsed once at load into a closure over the
// breaker's window of measures (circuit-window.ts).

/** What the expression reads, over the breaker's rolling window. */
export interface Measures {
  /** requests lb answered itself because the server could not be reached or failed (502/504 of its own) ÷ all */
  networkErrorRatio (): number
  /** requests with a status in [from, to) ÷ those with a status in [dFrom, dTo); 0 when the latter are none */
  responseCodeRatio (from: number, to: number, dFrom: number, dTo: number): number
  /** the q-th percentile (0-100) of the time to the response head, ms */
  latencyAtQuantileMs (q: number): number
}

export type Predicate = (m: Measures) => boolean

const TOKEN = /\s*(?:(&&|\|\||\(|\)|,|>=|<=|==|!=|>|<)|([A-Za-z]+)|(-?\d+(?:\.\d+)?))/y

/** The predicate of `src`, or why it is not one. */
export function parseExpression (src: string): Predicate | string {
  const tokens: string[] = []
  TOKEN.lastIndex = 0
  let at = 0
  while (at < src.length) {
    if (src.slice(at).trim() === '') break
    TOKEN.lastIndex = at
    const m = TOKEN.exec(src)
    if (m === null) return `unexpected "${src.slice(at, at + 10)}" at ${at}`
    tokens.push(m[1] ?? m[2] ?? m[3]!)
    at = TOKEN.lastIndex
  }
  let i = 0
  const peek = (): string | undefined => tokens[i]
  const expect = (t: string): void => {
    if (tokens[i] !== t) throw new Error(`expected "${t}", found ${tokens[i] === undefined ? 'the end' : `"${tokens[i]!}"`}`)
    i++
  }
  const num = (): number => {
    const t = tokens[i++]
    if (t === undefined || !/^-?\d/.test(t)) throw new Error(`expected a number, found ${t === undefined ? 'the end' : `"${t}"`}`)
    return Number(t)
  }
  const metric = (): (m: Measures) => number => {
    const name = tokens[i++]
    expect('(')
    const args: number[] = []
    if (peek() !== ')') {
      args.push(num())
      while (peek() === ',') { i++; args.push(num()) }
    }
    expect(')')
    const arity = (n: number): void => { if (args.length !== n) throw new Error(`${name!}() takes ${n} argument${n === 1 ? '' : 's'}`) }
    switch (name) {
      case 'NetworkErrorRatio': arity(0); return (m) => m.networkErrorRatio()
      case 'LatencyAtQuantileMS': {
        arity(1)
        const q = args[0]!
        if (q <= 0 || q > 100) throw new Error('LatencyAtQuantileMS() takes a quantile above 0 and up to 100')
        return (m) => m.latencyAtQuantileMs(q)
      }
      case 'ResponseCodeRatio': {
        arity(4)
        const [a, b, c, d] = args as [number, number, number, number]
        return (m) => m.responseCodeRatio(a, b, c, d)
      }
      default: throw new Error(`unknown function ${JSON.stringify(name)} (NetworkErrorRatio, ResponseCodeRatio, LatencyAtQuantileMS)`)
    }
  }
  const compare = (): Predicate => {
    if (peek() === '(') {
      i++
      const e = or()
      expect(')')
      return e
    }
    const f = metric()
    const op = tokens[i++]
    if (op === undefined || !['>', '<', '>=', '<=', '==', '!='].includes(op)) {
      throw new Error(`expected a comparison (> < >= <= == !=), found ${op === undefined ? 'the end' : `"${op}"`}`)
    }
    const v = num()
    switch (op) {
      case '>': return (m) => f(m) > v
      case '<': return (m) => f(m) < v
      case '>=': return (m) => f(m) >= v
      case '<=': return (m) => f(m) <= v
      case '==': return (m) => f(m) === v
      default: return (m) => f(m) !== v
    }
  }
  const and = (): Predicate => {
    let l = compare()
    while (peek() === '&&') { i++; const a = l; const r = compare(); l = (m) => a(m) && r(m) }
    return l
  }
  const or = (): Predicate => {
    let l = and()
    while (peek() === '||') { i++; const a = l; const r = and(); l = (m) => a(m) || r(m) }
    return l
  }
  try {
    if (tokens.length === 0) return 'an empty expression'
    const p = or()
    if (i < tokens.length) return `unexpected "${tokens[i]!}" after a complete expression`
    return p
  } catch (e) {
    return (e as Error).message
  }
}
