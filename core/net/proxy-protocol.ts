// PROXY protocol version 2 header (haproxy.org/download/2.9/doc/proxy-protocol.txt),
// PROXY command over TCP. The mTLS terminator (core/worker/tls/tls-terminator.ts)
// sends it first on each connection it hands to a worker, so that worker's uWS
// app (which parses it: getProxiedRemoteAddress) knows the real client address.
import { isMappedV4, parseIp } from './ip.js'

const SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a])
const V2_PROXY = 0x21
const TCP4 = 0x11
const TCP6 = 0x21

/** The header for a connection from src:srcPort to dst:dstPort; IPv4 when both ends are IPv4 (or IPv4-mapped). */
export function proxyV2Header (src: string, srcPort: number, dst: string, dstPort: number): Buffer {
  const s = parseIp(src)
  const d = parseIp(dst)
  if (s === null || d === null) throw new Error(`not IP addresses: ${src}, ${dst}`)
  const v4 = isMappedV4(s) && isMappedV4(d)
  const addrLen = v4 ? 12 : 36
  const out = Buffer.alloc(16 + addrLen)
  SIGNATURE.copy(out, 0)
  out[12] = V2_PROXY
  out[13] = v4 ? TCP4 : TCP6
  out.writeUInt16BE(addrLen, 14)
  if (v4) {
    out.set(s.subarray(12), 16)
    out.set(d.subarray(12), 20)
    out.writeUInt16BE(srcPort, 24)
    out.writeUInt16BE(dstPort, 26)
  } else {
    out.set(s, 16)
    out.set(d, 32)
    out.writeUInt16BE(srcPort, 48)
    out.writeUInt16BE(dstPort, 50)
  }
  return out
}
