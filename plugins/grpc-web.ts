// grpcWeb: lets a browser call a gRPC service, as Traefik's grpcWeb middleware:
// a gRPC-Web request (application/grpc-web[-text][+proto]) on a router whose
// service speaks gRPC (protocol "h2c" or "h2") is sent to the server as gRPC,
// and its answer returned as gRPC-Web, trailers in the body
// (core/worker/proxy/grpc-web.ts). `allow_origins` ("*" for any) answers the
// browser's CORS preflight and lets it read the answer and its grpc-status;
// other requests pass untouched.
import { type Checker, type Ctx, type Reply, type Table, HANDLED, NEXT, addResponseHeaders, definePlugin, grpcWebMode, join } from 'lb/plugin'

export interface GrpcWebConf {
  readonly allowOrigins: readonly string[]
}

// what grpc-web's JavaScript client sends, and what a browser's fetch may add
const ALLOW_HEADERS = 'content-type, x-grpc-web, x-user-agent, grpc-timeout, authorization'

function validate (c: Checker, t: Table, path: string): GrpcWebConf {
  c.table(t, path, ['allow_origins'])
  const allowOrigins = c.strings(t, 'allow_origins', path, [])
  allowOrigins.forEach((o, i) => {
    if (o !== '*' && !/^https?:\/\/[^/\s]+$/.test(o)) c.problem(`${join(path, 'allow_origins')}[${i}]`, 'an origin like "https://app.example.com", or "*"', o)
  })
  return { allowOrigins }
}

export default definePlugin<GrpcWebConf>({
  name: 'grpcWeb',
  api: 1,
  validate,
  create (conf) {
    const any = conf.allowOrigins.includes('*')
    const allowed = (origin: string): boolean => origin !== '' && (any || conf.allowOrigins.includes(origin))
    return {
      onRequest (ctx: Ctx) {
        const origin = ctx.header('origin')
        if (ctx.method === 'OPTIONS' && ctx.header('access-control-request-method') !== '') {
          // the browser's preflight: answered here, the gRPC server never sees it
          const reply: Reply = { status: 204, headers: ['vary', 'origin'], body: '' }
          if (allowed(origin)) {
            reply.headers.push('access-control-allow-origin', origin, 'access-control-allow-methods', 'POST, OPTIONS',
              'access-control-allow-headers', ALLOW_HEADERS, 'access-control-max-age', '600')
          }
          ctx.reply = reply
          return HANDLED
        }
        const mode = grpcWebMode(ctx.header('content-type'))
        if (mode === 0) return NEXT
        ctx.grpcWeb = mode
        if (allowed(origin)) addResponseHeaders(ctx, ['access-control-allow-origin', origin, 'access-control-expose-headers', 'grpc-status, grpc-message', 'vary', 'origin'])
        return NEXT
      },
    }
  },
})
