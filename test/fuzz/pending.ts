// Failures the campaign expects today, each waiting for a fix on another
// branch, keyed "generator family/failed check" (see lib/campaign.ts; the
// families are in lib/http-cases.ts, lib/ws-cases.ts, lib/h2-cases.ts and each surface's
// file). A case whose key is listed here is reported apart (count and one
// example) and does not fail its test; every other failure does. Once the
// fixes are merged, empty this list: every case must then pass. An entry that
// no case needs any more is named in the test's output ("remove it"). What an
// HTTP engine (uWS, llhttp) does before lb sees a byte is no pending work: it is
// documented in engine-limits.ts (ENGINE_LIMITS).
export interface Pending { surface: string, family: string, issue: string, why: string }

/**
 * node:http2 on Node 20 (a plain node:http2 server alike; Node 22 closes) leaves the TCP connection open after a GOAWAY that
 * nghttp2 sends by itself (COMPRESSION_ERROR, FRAME_SIZE_ERROR, PROTOCOL_ERROR from its frame checks): nghttp2 stops
 * reading, nothing closes the socket, and node gives lb no event for a GOAWAY it sent. The
 * session ends at http2.idle_timeout (180 s) instead of at once (RFC 9113 §5.4.1: "MUST close the TCP connection").
 * No request of it is served or forwarded meanwhile. Errors nghttp2 hands to node (GOAWAY INTERNAL_ERROR) close.
 * Tried and not kept: finding such a session by a PING that stays in nghttp2's outbound queue (it writes nothing
 * more). It closed 100 of these 107 cases on a quiet machine, but under load it missed the campaign's 1 s and once
 * closed the well-behaved bystander's live session. The rapid-reset limit is no longer among them: lb counts the
 * client's resets itself and closes the connection (core/worker/transport/h2/rapid-reset.ts).
 */
const GOAWAY_OPEN = 'lb keeps the connection after the GOAWAY nghttp2 sent itself, until idle_timeout; node:http2 tells lb nothing'
const GOAWAY_OPEN_FAMILIES = ['continuation', 'frame-size', 'header-limits', 'hpack', 'idle-closed', 'padding', 'priority', 'settings', 'window-update']
const NODE_MAJOR = Number(process.versions.node.split('.')[0])

export const PENDING: readonly Pending[] = [
  // Node 20 only: Node 22's node:http2 closes the connection after such a GOAWAY (the fuzz surface checks it)
  ...(NODE_MAJOR < 22 ? GOAWAY_OPEN_FAMILIES.map((f) => ({ surface: 'h2', family: `${f}/goaway-open`, issue: '#37 point 3', why: GOAWAY_OPEN })) : []),
]
