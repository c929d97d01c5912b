// A token claim as a request header value for the upstream (jwt and oidc
// forward chosen claims): strings as they are, anything else as JSON, and only
// printable ASCII (others escaped \uXXXX), so no claim can split or end the header.
export function claimHeaderValue (v: unknown): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v) ?? ''
  return s.replace(/[^\x20-\x7e]/g, (ch) => '\\u' + ch.charCodeAt(0).toString(16).padStart(4, '0'))
}
