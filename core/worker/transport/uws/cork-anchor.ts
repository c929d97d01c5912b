// The cork anchor: a way around a bug of this uWS build in late WebSocket upgrades (below).
import type { WebSocket, us_listen_socket } from 'uWebSockets.js'
import { dialSelf } from '../../ws/ws-handshake.js'
import { adopt } from './apps.js'
import type { Uws } from './native.js'

/**
 * A WebSocket this thread holds open to itself, only ever corked: the way around a bug of this uWS build. A late
 * upgrade (ours wait for the server's 101) must run in res.cork, and HttpResponse::cork, once its callback returns,
 * reads the HTTP state of the socket upgrade() just reallocated as a WebSocket: bytes that happen to say
 * "Connection: close" close it at once (101, then 1006; fixed in uWebSockets PR #1929, not in uWebSockets.js
 * 20.57). While another socket of the loop is corked, res.cork skips that check: so upgrades run inside
 * corkAnchor.cork(), their few writes uncorked. null until started or if it closed: upgrades take the plain path.
 */
let corkAnchor: WebSocket<unknown> | null = null
let anchorStarted: Promise<void> | null = null

/**
 * Connects the cork anchor: an app on an ephemeral loopback port, one node:net handshake to it, then the port
 * closes. Resolves once the anchor is open, or once connecting it failed (upgrades then take the plain path).
 */
export function startCorkAnchor (uws: Uws): Promise<void> {
  if (anchorStarted !== null) return anchorStarted
  anchorStarted = new Promise((resolve) => {
    const app = uws.App()
    adopt(app)
    let token: us_listen_socket | false = false
    const done = (): void => { if (token !== false) uws.us_listen_socket_close(token); token = false; resolve() }
    app.ws('/*', {
      compression: uws.DISABLED,
      maxPayloadLength: 16, // it never sends anything; more closes it
      idleTimeout: 0,
      sendPingsAutomatically: false,
      open: (ws: WebSocket<unknown>) => { corkAnchor ??= ws; done() },
      close: (ws: WebSocket<unknown>) => { if (ws === corkAnchor) corkAnchor = null },
    })
    app.listen('127.0.0.1', 0, (t: us_listen_socket | false) => {
      token = t
      if (t === false) resolve()
      else dialSelf(uws.us_socket_local_port(t), done)
    })
  })
  return anchorStarted
}

/** Runs `upgrade` (which calls res.cork) inside the anchor's cork when the anchor is open, else directly. */
export function underAnchor (upgrade: () => void): void {
  if (corkAnchor !== null) corkAnchor.cork(upgrade)
  else upgrade()
}
