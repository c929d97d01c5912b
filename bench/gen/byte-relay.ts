// The floor of any relay for bench/gen/relay.ts --ttft: a process that copies
// bytes between each client connection and its own connection to the server
// (node:net, no parsing, nothing else). What it adds to the first token is what
// one more process in the path costs on this machine (two more wake-ups, two
// more copies through the kernel); what lb adds beyond it is lb's own work.
//
//   node dist/bench/gen/byte-relay.js PORT     (prints "listening PORT")
import net from 'node:net'
import type { AddressInfo } from 'node:net'

const to = Number(process.argv[2])
const server = net.createServer({ noDelay: true }, (client) => {
  const up = net.connect({ host: '127.0.0.1', port: to, noDelay: true })
  client.pipe(up).pipe(client)
  client.on('error', () => up.destroy())
  up.on('error', () => client.destroy())
})
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as AddressInfo).port}\n`))
process.on('SIGTERM', () => process.exit(0))
