// The gRPC server of bench/h2: @grpc/grpc-js over h2c with one unary method,
// /bench.Echo/Unary, answering its request message as it came (raw bytes, no
// proto compiled). Prints its port once bound.
//   node dist/bench/h2/grpc-backend.js PORT
import grpc from '@grpc/grpc-js'

const identity = (b: Buffer): Buffer => b
const UNARY: grpc.MethodDefinition<Buffer, Buffer> = {
  path: '/bench.Echo/Unary',
  requestStream: false,
  responseStream: false,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity,
}

const server = new grpc.Server()
server.addService({ Unary: UNARY }, {
  Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request),
})
server.bindAsync(`127.0.0.1:${process.argv[2] ?? '0'}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
  if (err !== null) throw err
  process.stdout.write(`${port}\n`)
})
