// The path options of the path middlewares (stripPrefix prefixes, addPrefix
// prefix, replacePath path): checked at load so `lb check` names a bad one.
// A path lb compares with or writes into a request path must be one the
// client could have sent in normal form: "/" first, printable ASCII, no "?",
// "#" or "\" (the query and fragment are not the path's), no space. What it
// yields after a rewrite is normalised again anyway (rewritePath).
import type { Checker } from 'lb/plugin'

const PATH_CHARS = /^\/[\x21-\x7e]*$/
const NOT_IN_PATH = /[?#\\]/

/** Records a problem at `at` when `p` cannot be a path prefix or a path; `what` says what was expected. */
export function checkPathOption (c: Checker, p: string, at: string, what: string): void {
  if (!PATH_CHARS.test(p) || NOT_IN_PATH.test(p)) c.problem(at, `${what} (starting with "/", printable ASCII without space, "?", "#" or "\\")`, p)
}
