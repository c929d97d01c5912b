// The gRPC test servers and calls the test/h2/grpc-*.test.ts files share:
// @grpc/grpc-js with raw bytes for messages (no proto compiled: a test writes
// the few protobuf bytes it needs, e.g. the health check's, by hand).
import grpc from '@grpc/grpc-js'

export const raw = (b: Buffer): Buffer => b

/** A method of raw bytes at `path` ("/pkg.Service/Method"); streaming on either side when asked. */
export const def = (path: string, requestStream = false, responseStream = false): grpc.MethodDefinition<Buffer, Buffer> => ({
  path, requestStream, responseStream, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw,
})

/** grpc.health.v1.Health/Check answering SERVING (HealthCheckResponse.status, field 1, varint 1). */
export const HEALTH_CHECK = def('/grpc.health.v1.Health/Check')
export const SERVING = Buffer.from([0x08, 1])
export const NOT_SERVING = Buffer.from([0x08, 2])

/**
 * A grpc-js server with `methods` (name → definition) implemented by `handlers`, bound at `address`
 * ("127.0.0.1:0" for a free port, "unix:/path"); resolves with the server and the bound port.
 */
export async function serveGrpc (methods: Record<string, grpc.MethodDefinition<Buffer, Buffer>>, handlers: grpc.UntypedServiceImplementation,
  address = '127.0.0.1:0', creds = grpc.ServerCredentials.createInsecure()): Promise<{ server: grpc.Server, port: number }> {
  const server = new grpc.Server()
  server.addService(methods as unknown as grpc.ServiceDefinition, handlers)
  const port = await new Promise<number>((resolve, reject) => server.bindAsync(address, creds, (err, p) => err !== null ? reject(err) : resolve(p)))
  return { server, port }
}

/** A unary call of raw bytes; resolves with the reply, rejects with the grpc error (its .code the status). */
export function unary (client: grpc.Client, method: string, body: Buffer | string, opts: grpc.CallOptions = {}): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(method, raw, raw, Buffer.from(body), new grpc.Metadata(), opts, (err, v) => err !== null ? reject(err) : resolve(v!))
  })
}
