// Let's Encrypt's test CA on loopback for the ACME tests: Debian's `pebble`
// with its own config in a temp folder, and `pebble-challtestsrv` from the same
// package as its DNS server (every name resolves to 127.0.0.1, no AAAA), so
// that pebble validates http-01 against lb's http entry point (httpPort).
// Each is stopped by its PID. Pebble makes a new root for every run: rootPem()
// fetches the current one from its management port.
import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import https from 'node:https'
import { join } from 'node:path'
import { freePort, sleep, tempDir } from '../helpers.js'
import { makeCerts } from './certs.js'

export interface PebbleOptions {
  /** lb's http entry point port: where pebble validates http-01 */
  readonly httpPort: number
  /** lb's https entry point port: where pebble validates tls-alpn-01; default: a free port (none answers) */
  readonly tlsPort?: number
  /** certificate lifetime in seconds; 0 = pebble's default (5 years) */
  readonly validitySec?: number
}

export interface Pebble {
  /** the ACME directory URL */
  readonly directory: string
  /** PEM file of the CA that signed pebble's HTTPS certificate: lb's ca_certificate */
  readonly caCertificate: string
  /** starts pebble (again after stop): a new root each time */
  start (): Promise<void>
  /** pebble's output so far */
  readonly log: () => string
  /** the root of the certificates the running pebble issues */
  rootPem (): Promise<string>
  stop (): Promise<void>
}

function kill (p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    p.once('exit', () => resolve())
    process.kill(p.pid!, 'SIGTERM')
  })
}

/** Spawns `cmd` and waits until its output matches `ready`. */
async function run (cmd: string, args: string[], env: Record<string, string>, ready: RegExp): Promise<{ proc: ChildProcess, out: () => string }> {
  const proc = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  proc.stdout!.on('data', (d: Buffer) => { out += d.toString() })
  proc.stderr!.on('data', (d: Buffer) => { out += d.toString() })
  for (const end = Date.now() + 15_000; !ready.test(out);) {
    if (proc.exitCode !== null || Date.now() > end) {
      await kill(proc)
      throw new Error(`${cmd} did not start: ${out}`)
    }
    await sleep(20)
  }
  return { proc, out: () => out }
}

let dns: { port: number, proc: ChildProcess } | null = null

/** pebble-challtestsrv as a DNS server only (one per test process). */
async function startDns (): Promise<number> {
  if (dns !== null) return dns.port
  const port = await freePort()
  const mgmt = await freePort()
  const { proc } = await run('pebble-challtestsrv', ['-defaultIPv4', '127.0.0.1', '-defaultIPv6', '', '-dns01', `127.0.0.1:${port}`,
    '-http01', '', '-https01', '', '-tlsalpn01', '', '-management', `127.0.0.1:${mgmt}`], {}, /Starting management server/)
  dns = { port, proc }
  return port
}

export async function stopDns (): Promise<void> {
  if (dns !== null) await kill(dns.proc)
  dns = null
}

/** A pebble configured (ports, certificate, config file) but not started: start() runs it. */
export async function planPebble (o: PebbleOptions): Promise<Pebble> {
  const dir = tempDir('lb-pebble-')
  const certs = makeCerts() // pebble's own HTTPS certificate: localhost, 127.0.0.1
  const port = await freePort()
  const mgmt = await freePort()
  const config = join(dir, 'pebble.json')
  writeFileSync(config, JSON.stringify({
    pebble: {
      listenAddress: `127.0.0.1:${port}`,
      managementListenAddress: `127.0.0.1:${mgmt}`,
      certificate: certs.server.cert,
      privateKey: certs.server.key,
      httpPort: o.httpPort,
      tlsPort: o.tlsPort ?? await freePort(),
      ocspResponderURL: '',
      externalAccountBindingRequired: false,
      ...(o.validitySec !== undefined && o.validitySec > 0 ? { certificateValidityPeriod: o.validitySec } : {}),
    },
  }))
  // no random validation delays, no nonces refused on purpose, always a fresh authorization (a real challenge each order)
  const env = { PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0', PEBBLE_AUTHZREUSE: '0' }
  let running: { proc: ChildProcess, out: () => string } | null = null
  const ca = certs.ca
  return {
    directory: `https://127.0.0.1:${port}/dir`,
    caCertificate: ca,
    start: async () => {
      const dnsPort = await startDns()
      running = await run('pebble', ['-config', config, '-dnsserver', `127.0.0.1:${dnsPort}`], env, /Listening on/)
    },
    log: () => running?.out() ?? '',
    rootPem: () => new Promise((resolve, reject) => {
      https.get({ host: '127.0.0.1', port: mgmt, path: '/roots/0', ca: readFileSync(ca) }, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (d: string) => { body += d })
        res.on('end', () => resolve(body))
      }).on('error', reject)
    }),
    stop: async () => {
      if (running !== null) await kill(running.proc)
      running = null
    },
  }
}
