// Where lb finds uWebSockets.js's native binary for this runtime, and the one
// start-up error line when it cannot load. The loading itself is in
// core/worker/transport/http.ts, the only module that touches uWS.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type LbError, lbError } from '../../errors.js'

/** lb's folder (this is dist/core/worker/transport/uws-support.js): native/ holds the binaries' record and lb's patched copy. */
const ROOT = fileURLToPath(new URL('../../../../', import.meta.url))

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
