// nginx stub_status, byte for byte: the format strings are
//   "Active connections: %uA \n" "server accepts handled requests\n"
//   " %uA %uA %uA \n" "Reading: %uA Writing: %uA Waiting: %uA \n"
// (note the trailing spaces). Counters cover the whole process: the striped
// counters of every worker plus the kernel census of client connections.
import { type Shm, G_ACCEPTS, G_READING, G_REQUESTS, G_WRITING, H_CONN_ACTIVE } from '../shm/layout.js'
import { sumGlobal } from '../shm/counters.js'

export function renderStatus (shm: Shm): string {
  const reading = sumGlobal(shm, G_READING)
  const writing = sumGlobal(shm, G_WRITING)
  // the census runs about once a second: never report fewer connections than requests in progress
  const active = Math.max(Atomics.load(shm.i32, H_CONN_ACTIVE), reading + writing)
  const accepts = Math.max(sumGlobal(shm, G_ACCEPTS), active)
  const requests = sumGlobal(shm, G_REQUESTS)
  const waiting = active - reading - writing
  return `Active connections: ${active} \nserver accepts handled requests\n ${accepts} ${accepts} ${requests} \n` +
    `Reading: ${reading} Writing: ${writing} Waiting: ${waiting} \n`
}
