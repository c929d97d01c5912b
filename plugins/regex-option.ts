// A regexp option of the regex middlewares (stripPrefixRegex, replacePathRegex,
// redirectRegex): Go syntax, as Traefik's, checked at load so `lb check` names
// a pattern the linear-time engine cannot run, and why.
import { type Checker, linearRegExp } from 'lb/plugin'

/** Records a problem at `at` when `src` cannot be compiled; the config keeps the source (plain data for the workers). */
export function checkRegexOption (c: Checker, src: string, at: string): void {
  const re = linearRegExp(src)
  if (typeof re === 'string') c.problem(at, `a regular expression lb can run in linear time (${re})`, src)
}

/** The compiled regexp of a source checkRegexOption accepted. */
export function compiled (src: string, global = false): RegExp {
  const re = linearRegExp(src, global)
  if (typeof re === 'string') throw new Error(`regexp ${src}: ${re}`) // validate refused it already
  return re
}
