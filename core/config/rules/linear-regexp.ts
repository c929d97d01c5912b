// The regexps of the regex middlewares (stripPrefixRegex, replacePathRegex,
// redirectRegex), written in Go's syntax as Traefik's are, run on V8's
// linear-time engine (the `l` flag, behind --enable-experimental-regexp-engine):
// no request can make them backtrack, whatever the pattern, and captures work,
// which the routers' automata (regexp-dfa.ts) do not give. A pattern that engine
// cannot run (backreferences, lookaround) is refused at load with V8's reason.
// The flag is process-wide and read when a regexp is made: set here, before any
// `l` regexp exists, in whichever thread loads this module first.
import v8 from 'node:v8'

v8.setFlagsFromString('--enable-experimental-regexp-engine')

/** Go syntax the JS engine spells otherwise: named groups, the text anchors. */
function fromGo (src: string): { source: string, flags: string } | string {
  let flags = ''
  let s = src
  const lead = /^\(\?([imsU]+)\)/.exec(s)
  if (lead !== null) {
    if (lead[1]!.includes('U')) return 'the U flag (ungreedy) is not supported'
    // Go's m makes ^ $ match at line breaks, as JS's m; s lets . match \n, as JS's s; i as JS's i
    flags = [...new Set(lead[1]!)].join('')
    s = s.slice(lead[0].length)
  }
  if (/\(\?[a-zA-Z]+[:)]/.test(s.replace(/\\./g, ''))) return 'flags are supported only at the start, as (?i)'
  if (/\\[pP]/.test(s)) return 'Unicode classes (\\p, \\P) are not supported here: write the ranges'
  if (s.includes('[:')) return 'POSIX classes ([[:alpha:]]) are not supported here: write the ranges, as [a-zA-Z]'
  s = s.replace(/\(\?P</g, '(?<').replace(/\\A/g, '^').replace(/\\z/g, '$')
  return { source: s, flags }
}

/**
 * `src` (Go syntax) as a linear-time RegExp (`global` for replacing every match), or why it cannot be one.
 */
export function linearRegExp (src: string, global = false): RegExp | string {
  const t = fromGo(src)
  if (typeof t === 'string') return t
  try {
    return new RegExp(t.source, t.flags + (global ? 'g' : '') + 'l')
  } catch (e) {
    return (e as Error).message.replace(/^Invalid regular expression: /, '')
  }
}

/**
 * Go's Regexp.Expand of `template` for one match: $1 and ${1} by number, $name and ${name} by name
 * (the longest run of letters, digits and "_" after "$"), $$ a "$"; an unknown group is "".
 */
export function expandGo (template: string, m: RegExpExecArray | string[], groups: Record<string, string | undefined> | undefined): string {
  let out = ''
  for (let i = 0; i < template.length; i++) {
    const ch = template[i]!
    if (ch !== '$' || i === template.length - 1) { out += ch; continue }
    let name: string
    if (template[i + 1] === '$') { out += '$'; i++; continue }
    if (template[i + 1] === '{') {
      const end = template.indexOf('}', i + 2)
      if (end < 0) { out += ch; continue }
      name = template.slice(i + 2, end)
      i = end
    } else {
      const run = /^[A-Za-z0-9_]+/.exec(template.slice(i + 1))
      if (run === null) { out += ch; continue }
      name = run[0]
      i += name.length
    }
    if (/^\d+$/.test(name)) out += m[Number(name)] ?? ''
    else out += groups?.[name] ?? ''
  }
  return out
}

/** Go's Regexp.ReplaceAllString: every match of `re` (global) in `s` replaced by `template` expanded. */
export function replaceAllGo (re: RegExp, s: string, template: string): string {
  return s.replace(re, (...args: unknown[]) => {
    const last = args[args.length - 1]
    const groups = typeof last === 'object' && last !== null ? last as Record<string, string | undefined> : undefined
    const n = groups === undefined ? args.length - 2 : args.length - 3 // match, captures..., offset, input[, groups]
    return expandGo(template, args.slice(0, n) as string[], groups)
  })
}
