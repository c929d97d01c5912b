// nginx stub_status, byte for byte: the format strings are
//   "Active connections: %uA \n" "server accepts handled requests\n"
//   " %uA %uA %uA \n" "Reading: %uA Writing: %uA Waiting: %uA \n"
// (note the trailing spaces). Counters cover the whole process: the striped
// counters of every worker and the open connection count (connections.ts).
// "handled" is accepts minus the connections closed at once over the cap, as nginx's.
import { type Shm, G_ACCEPTS, G_READING, G_REFUSED, G_REQUESTS, G_WRITING, H_CONN_ACTIVE } from '../shm/layout.js'
import { sumGlobal } from '../shm/counters.js'

export function renderStatus (shm: Shm): string {
  const reading = sumGlobal(shm, G_READING)
  const writing = sumGlobal(shm, G_WRITING)
  const active = Atomics.load(shm.i32, H_CONN_ACTIVE)
  const accepts = sumGlobal(shm, G_ACCEPTS)
  const handled = accepts - sumGlobal(shm, G_REFUSED)
  const requests = sumGlobal(shm, G_REQUESTS)
  // a request of a TCP or upgraded connection is in no HTTP state: never below 0
  const waiting = Math.max(0, active - reading - writing)
  return `Active connections: ${active} \nserver accepts handled requests\n ${accepts} ${handled} ${requests} \n` +
    `Reading: ${reading} Writing: ${writing} Waiting: ${waiting} \n`
}
