// One ACME order through acme-client (RFC 8555: account, order, http-01 or
// tls-alpn-01 (RFC 8737) authorizations, finalize with a CSR, download the chain); no JWS of our own.
// Runs in the control plane only.
import https from 'node:https'
import { readFileSync } from 'node:fs'
import tls from 'node:tls'
import acme from 'acme-client'
import type { AcmeResolverConf, KeyType } from '../config/acme.js'
import type { StoredAccount, StoredCert } from './store.js'

/** One challenge's answer: http-01's key authorization under its token, or tls-alpn-01's certificate for its host. */
export type Answer =
  | { readonly type: 'http-01', readonly token: string, readonly keyAuthorization: string }
  | { readonly type: 'tls-alpn-01', readonly host: string, readonly cert: string, readonly key: string }

/** Where answers go: the workers of the resolver's challenge entry point (resolves once they serve it). */
export interface ChallengeSink {
  add (answer: Answer): Promise<void>
  remove (answer: Answer): Promise<void>
}

let agent: https.Agent | undefined

/**
 * Fetches the directory as acme-client will (same trust). Why: acme-client 5.4
 * loses the reason of a request that got no response (refused, TLS not
 * verified) once its retries are exhausted and throws "Cannot read properties
 * of undefined (reading 'config')" instead; this says what is wrong.
 */
function probeDirectory (url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = https.get(url, { agent, timeout: 30_000 }, (res) => {
      res.resume()
      if (res.statusCode === 200) resolve()
      else reject(new Error(`directory ${url} answered ${res.statusCode}`))
    })
    req.on('timeout', () => req.destroy(new Error(`directory ${url}: no answer within 30 s`)))
    req.on('error', (err) => reject(new Error(`directory ${url}: ${err.message}`)))
  })
}

/**
 * acme-client sends every request through one axios instance per process, so
 * the CA certificates trusted for directories (ca_certificate of each resolver)
 * are trusted for all of them, on top of the system's roots. Its own retries
 * (5, waiting 5 to 25 s each, so a CA that is down holds an order for over a
 * minute) are off: a failed order is retried by the manager, with back-off.
 */
export function configureAcmeClient (caFiles: readonly string[]): void {
  const extra = caFiles.filter((f) => f !== '').map((f) => readFileSync(f, 'latin1'))
  agent = extra.length === 0 ? undefined : new https.Agent({ ca: [...tls.rootCertificates, ...extra] })
  acme.axios.defaults.httpsAgent = agent
  ;(acme.axios.defaults as { acmeSettings?: { retryMaxAttempts: number } }).acmeSettings!.retryMaxAttempts = 0
}

export async function newKey (type: KeyType): Promise<string> {
  const key = type === 'EC256' ? await acme.crypto.createPrivateEcdsaKey('P-256') : await acme.crypto.createPrivateRsaKey(type === 'RSA2048' ? 2048 : 4096)
  return key.toString()
}

async function answer (conf: AcmeResolverConf, authz: acme.Authorization, challenge: { type: string, token: string }, keyAuthorization: string): Promise<Answer> {
  if (conf.challenge === 'http-01') return { type: 'http-01', token: challenge.token, keyAuthorization }
  // acme-client makes the RFC 8737 certificate (acmeIdentifier extension); an EC key is quick to make
  const key = await acme.crypto.createPrivateEcdsaKey('P-256')
  const [, cert] = await acme.crypto.createAlpnCertificate(authz, keyAuthorization, key)
  return { type: 'tls-alpn-01', host: authz.identifier.value.toLowerCase(), cert: cert.toString(), key: key.toString() }
}

/** Orders a certificate for `domains` (the first is the subject); returns it with the account as the CA now knows it. */
export async function order (conf: AcmeResolverConf, account: StoredAccount, domains: readonly string[], sink: ChallengeSink): Promise<{ account: StoredAccount, cert: StoredCert }> {
  await probeDirectory(conf.caServer)
  const client = new acme.Client({ directoryUrl: conf.caServer, accountKey: account.key, ...(account.url !== '' ? { accountUrl: account.url } : {}) })
  const key = await newKey(conf.keyType)
  const [, csr] = await acme.crypto.createCsr({ commonName: domains[0]!, altNames: [...domains] }, key)
  const answers = new Map<string, Answer>()
  const cert = await client.auto({
    csr,
    ...(conf.email !== '' ? { email: conf.email } : {}),
    termsOfServiceAgreed: true, // configuring a resolver is agreeing to its CA's terms (docs/tls-ws-tcp.md)
    // acme-client's own pre-check fetches the token itself over DNS from this host, which need not resolve
    // the names as the CA does; the CA's validation is the one that counts
    skipChallengeVerification: true,
    challengePriority: [conf.challenge],
    challengeCreateFn: async (authz, challenge, keyAuthorization) => {
      answers.set(challenge.token, await answer(conf, authz, challenge, keyAuthorization))
      await sink.add(answers.get(challenge.token)!)
    },
    challengeRemoveFn: async (_authz, challenge) => {
      const a = answers.get(challenge.token)
      answers.delete(challenge.token)
      if (a !== undefined) await sink.remove(a)
    },
  })
  return { account: { key: account.key, url: client.getAccountUrl() }, cert: { domains: [...domains], cert, key } }
}
