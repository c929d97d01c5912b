// Loading uWebSockets.js's native binary: where lb finds it for this runtime,
// and the one start-up error line when it cannot load.
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { constants } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type LbError, lbError } from '../../../errors.js'

/** lb's folder (this is dist/core/worker/transport/uws/native.js): native/ holds the binaries' record and lb's patched copy. */
const ROOT = fileURLToPath(new URL('../../../../../', import.meta.url))

/** The systems and runtimes uWebSockets.js 20.57 has binaries for, as the refusal line says it. */
const SUPPORTED = 'Node.js 20, 22 or 24 LTS (or 25) on Linux x64/arm64 with glibc 2.38 or newer ' +
  '(2.36 and 2.37 once lb\'s install step has patched its copy, which needs a C compiler), macOS or Windows'

export interface NativeBuild {
  /** the binary's file name for this platform, architecture and Node ABI */
  readonly name: string
  /** uWebSockets.js's version, as native/uws.json records it */
  readonly version: string
  /** where lb's install step puts its patched copy (native/build/<version>/), if it made one */
  readonly dir: string
}

/**
 * On glibc 2.36-2.37 lb's install step (scripts/uws-native.mjs) made
 * native/build/<version>/: the binary with its GLIBC_2.38 version need marked
 * weak, and a shim library (libisoc23.so) of the three C23 functions it calls
 * that this glibc lacks. v20.57 has no JS fallback: a binary that does not load
 * is one start-up error line (unsupported) that says which systems and Node versions work.
 */
export function nativeBuild (): NativeBuild {
  const { version } = JSON.parse(readFileSync(join(ROOT, 'native', 'uws.json'), 'utf8')) as { version: string }
  return { name: `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`, version, dir: join(ROOT, 'native', 'build', version) }
}

/** LB_ERR_UWS_UNSUPPORTED for a binary that did not load: this runtime and system, why, and what works. */
export function unsupported (err: unknown, version: string): LbError {
  const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime
  const system = `${process.platform} ${process.arch}${glibc === undefined ? '' : `, glibc ${glibc}`}`
  // the package's own message is several lines, the loader's reason among them ("Error: Cannot find module ...")
  const lines = (err as Error).message.split('\n')
  const why = (lines.find((l) => l.startsWith('Error: ')) ?? lines[0]!).replace(/^Error: /, '')
  const fix = /GLIBC_2\.3[89]/.test(why) ? ` (run \`node ${join(ROOT, 'scripts', 'uws-native.mjs')}\` to patch lb's copy)` : ''
  return lbError('LB_ERR_UWS_UNSUPPORTED', { version, runtime: `Node.js ${process.version} (ABI ${process.versions.modules}) on ${system}: ${why}${fix}`, supported: SUPPORTED })
}

export type Uws = typeof import('uWebSockets.js')

/**
 * Loads uWS's native binary: lb's patched copy where its install step made one (nativeBuild), the shim first,
 * into the global symbol scope, then the copy with RTLD_NOW so that a missing symbol is an error here and never a
 * crash at its first call; elsewhere the package's binary as it is.
 *
 * `maxHeaderBytes` > 0 (limits.max_header_bytes): uWS's limit on a request head becomes twice it, so that a head
 * over the setting reaches lb's check (request-check.ts), whose 431 names it. uWS reads UWS_HTTP_MAX_HEADERS_SIZE
 * once per process, when the binary first loads: the control plane loads it before any worker starts, and a
 * change of the setting needs a restart.
 */
export function loadUws (maxHeaderBytes = 0): Uws {
  if (maxHeaderBytes > 0) process.env.UWS_HTTP_MAX_HEADERS_SIZE = String(2 * maxHeaderBytes)
  const require = createRequire(import.meta.url)
  const { name, version, dir } = nativeBuild()
  try {
    if (!existsSync(join(dir, name))) return require('uWebSockets.js') as Uws
    const { RTLD_NOW, RTLD_GLOBAL } = constants.dlopen as { RTLD_NOW: number, RTLD_GLOBAL: number }
    process.dlopen({ exports: {} }, join(dir, 'libisoc23.so'), RTLD_NOW | RTLD_GLOBAL)
    const m = { exports: {} }
    process.dlopen(m, join(dir, name), RTLD_NOW)
    return m.exports as Uws
  } catch (err) {
    throw unsupported(err, version)
  }
}
