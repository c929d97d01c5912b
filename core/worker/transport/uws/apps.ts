// The uWS apps of this thread: every one made gets the client time-outs in force, and all are closed together when
// the thread ends.
import type { TemplatedApp } from 'uWebSockets.js'

const apps: TemplatedApp[] = []

/** What this build's apps have beyond its .d.ts: adoptSocket, and the client time-outs in s, checked on a 4-second tick (TimeoutsConf says what each covers). */
export type TimedApp = TemplatedApp & { setIdleTimeout (s: number): TimedApp, setResponseTimeout (s: number): TimedApp, adoptSocket (fd: number): void }
let clientTimeouts = [30, 30] // uWS's own until the config's are set: [timeouts.header, timeouts.client_keep_alive]
const applyTimeouts = (app: TemplatedApp): void => { (app as TimedApp).setIdleTimeout(clientTimeouts[0]!).setResponseTimeout(clientTimeouts[1]!) }
export const adopt = (app: TemplatedApp): void => { apps.push(app); applyTimeouts(app) } // closed by closeAllApps

/** Sets the client time-outs (s) of every app of this thread and of those it makes later; new timers use them. */
export function setClientTimeouts (headerS: number, keepAliveS: number): void { clientTimeouts = [headerS, keepAliveS]; apps.forEach(applyTimeouts) }

/**
 * Closes every app of this thread with all its connections. A worker thread must call this before it ends (process
 * 'exit'): ending with uWS sockets still registered in the thread's libuv loop trips a libuv assertion that aborts
 * the whole process, not just the thread.
 */
export function closeAllApps (): void { for (const app of apps.splice(0)) app.close() }
