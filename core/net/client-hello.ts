// The server name (SNI, RFC 6066 §3) and the ALPN protocols (RFC 7301 §3.1) a
// TLS ClientHello offers, read from the first bytes of a connection before any
// TLS library sees them. Why: node:tls picks the certificate (SNICallback)
// knowing only the server name, and the tls-alpn-01 challenge (RFC 8737) must
// present another certificate to a client offering "acme-tls/1" for that same
// name (tls-alpn.ts).
//
// Only a ClientHello in the first TLS record is read (up to 16 KiB: every
// client's fits; RFC 8446 allows splitting it over records, which no
// validation server does).

export interface ClientHello {
  /** lower-case; '' without SNI */
  readonly servername: string
  readonly alpn: readonly string[]
}

/** Bytes of a TLS record header; the largest record body (2^14 plus the 2048 bytes a compressed/protected record may add) */
const RECORD_HEADER = 5
const MAX_RECORD = 16_384 + 2048

const EXT_SERVER_NAME = 0
const EXT_ALPN = 16

/**
 * null: more bytes are needed. 'not-tls': these bytes start no ClientHello
 * record (or it is malformed): let the TLS library refuse them as it does.
 */
export function parseClientHello (buf: Buffer): ClientHello | null | 'not-tls' {
  if (buf.length < RECORD_HEADER) return null
  // handshake record (22), TLS major version 3
  if (buf[0] !== 22 || buf[1] !== 3) return 'not-tls'
  const len = buf.readUInt16BE(3)
  if (len > MAX_RECORD) return 'not-tls'
  if (buf.length < RECORD_HEADER + len) return null
  try {
    return read(buf.subarray(RECORD_HEADER, RECORD_HEADER + len))
  } catch {
    return 'not-tls' // a length past the record's end (RangeError)
  }
}

function read (b: Buffer): ClientHello | 'not-tls' {
  if (b[0] !== 1) return 'not-tls' // handshake type client_hello
  const end = Math.min(b.length, 4 + b.readUIntBE(1, 3))
  let at = 4 + 2 + 32 // handshake header, legacy_version, random
  at += 1 + b.readUInt8(at) // legacy_session_id
  at += 2 + b.readUInt16BE(at) // cipher_suites
  at += 1 + b.readUInt8(at) // legacy_compression_methods
  let servername = ''
  const alpn: string[] = []
  if (at >= end) return { servername, alpn } // no extensions
  const extEnd = Math.min(end, at + 2 + b.readUInt16BE(at))
  at += 2
  while (at + 4 <= extEnd) {
    const type = b.readUInt16BE(at)
    const size = b.readUInt16BE(at + 2)
    const body = b.subarray(at + 4, at + 4 + size)
    at += 4 + size
    // server_name_list: one host_name (type 0) entry with a 2-byte length
    if (type === EXT_SERVER_NAME && body.length >= 5 && body[2] === 0) servername = body.toString('latin1', 5, 5 + body.readUInt16BE(3)).toLowerCase()
    if (type === EXT_ALPN) {
      for (let p = 2; p < body.length; p += 1 + body[p]!) alpn.push(body.toString('latin1', p + 1, p + 1 + body[p]!))
    }
  }
  return { servername, alpn }
}
