// Who may pass, and what the upstream learns of them: the oidc middleware's
// rules over a user's claims (allowed email domains, claim matches) and the
// claims it forwards as request headers. Used at login, at each refresh, and
// for every new bearer token; the session cookie keeps the result.
import { claimHeaderValue } from 'lb/plugin'
import type { OidcConf } from './oidc-config.js'

type Claims = Readonly<Record<string, unknown>>

/** '' when the claims pass every rule, else why not (for the 403 and the log). */
export function refusal (conf: OidcConf, claims: Claims): string {
  if (conf.emailDomains.length > 0) {
    const email = typeof claims.email === 'string' ? claims.email.toLowerCase() : ''
    if (email === '') return 'no email claim, and allowed_email_domains is set'
    // anyone may type any address at a provider that does not verify it: only a verified one shows the domain is theirs
    // (a missing email_verified, as in many access tokens, is not a yes)
    if (claims.email_verified !== true && claims.email_verified !== 'true') return `the email ${email} is not verified (email_verified is not true)`
    const at = email.indexOf('@')
    if (at <= 0 || at !== email.lastIndexOf('@')) return `the email ${email} is not an address with one "@"`
    const domain = email.slice(at + 1)
    if (!conf.emailDomains.includes(domain)) return `the email domain ${domain} is not among allowed_email_domains`
  }
  for (const [claim, accepted] of conf.claimMatch) {
    const v = claims[claim]
    const held = Array.isArray(v) ? v : v === undefined ? [] : [v]
    if (!held.some((x) => typeof x === 'string' && accepted.includes(x))) return `claim ${claim} holds none of ${accepted.join(', ')}`
  }
  return ''
}

/** flat [header, value, ...] of the forwarded claims the user has */
export function claimHeaders (conf: OidcConf, claims: Claims): string[] {
  const out: string[] = []
  for (const [claim, header] of conf.forward) {
    const v = claims[claim]
    if (v !== undefined) out.push(header, claimHeaderValue(v))
  }
  return out
}

/** the name for the access log: email, else sub */
export function userOf (claims: Claims): string {
  return typeof claims.email === 'string' ? claims.email : typeof claims.sub === 'string' ? claims.sub : ''
}
