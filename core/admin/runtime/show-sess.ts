// `show sess` for the runtime socket: one line per client connection, in
// HAProxy's short form, read from the kernel's socket table.
import { readFile } from 'node:fs/promises'
import { isMappedV4 } from '../../net/ip.js'
import type { AdminContext } from '../context.js'

const ESTABLISHED = '01'

function hexAddr (hex: string): string {
  const [a, p] = hex.split(':') as [string, string]
  const port = parseInt(p, 16)
  if (a.length === 8) {
    const n = parseInt(a, 16)
    return `${n & 0xff}.${(n >>> 8) & 0xff}.${(n >>> 16) & 0xff}.${n >>> 24}:${port}`
  }
  const words = a.match(/.{8}/g)!.map((w) => Buffer.from(w, 'hex').reverse())
  const b = Buffer.concat(words)
  if (isMappedV4(b)) return `${b[12]}.${b[13]}.${b[14]}.${b[15]}:${port}`
  const groups: string[] = []
  for (let i = 0; i < 16; i += 2) groups.push(b.readUInt16BE(i).toString(16))
  return `[${groups.join(':')}]:${port}`
}

/**
 * `show sess`: one line per client connection open on an entry point, from
 * the kernel's socket table (uWS keeps no per-connection registry we could
 * read across workers). The backend and server of a connection are not known
 * here and print as HAProxy prints unset ones.
 */
export async function showSess (ctx: AdminContext): Promise<string[]> {
  const eps = ctx.config().entrypoints
  const ports = new Map(eps.map((e) => [e.port, e.name]))
  const lines: string[] = []
  for (const [file, proto] of [['/proc/net/tcp', 'tcpv4'], ['/proc/net/tcp6', 'tcpv6']] as const) {
    let text: string
    try { text = await readFile(file, 'latin1') } catch { continue }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/)
      if (f.length < 10 || f[3] !== ESTABLISHED) continue
      const local = f[1]!
      const port = parseInt(local.split(':')[1]!, 16)
      const fe = ports.get(port)
      if (fe === undefined) continue
      const src = hexAddr(f[2]!)
      const p = src.startsWith('[') ? 'tcpv6' : proto === 'tcpv6' ? 'tcpv4' : proto
      lines.push(`0x${Number(f[9]).toString(16)}: proto=${p} src=${src} fe=${fe} be=<NONE> srv=<none>`)
    }
  }
  return lines
}
