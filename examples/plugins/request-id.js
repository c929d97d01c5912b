// request-id: an example third-party plugin for lb (walked through in PLUGINS.md).
//
// Gives every request an id: the client's own X-Request-Id when it sent a
// valid one, else a new random UUID. The id goes upstream in that header and
// comes back to the client on the response, unless the upstream set one itself.
//
//   [middlewares.ids]
//   type = "./plugins/request-id.js"   # a path relative to the config file, or a package name
//   header = "X-Request-Id"            # optional; the header carrying the id
//   trust_client = true                # optional; keep a client-sent id (else always generate)
import { randomUUID } from 'node:crypto'
import { NEXT, addUpstreamHeaders, definePlugin, dropRequestHeaders, findHeader } from 'lb/plugin'

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const CLIENT_ID = /^[A-Za-z0-9._-]{1,128}$/

/** @typedef {{ header: string, trustClient: boolean }} RequestIdConf */

export default definePlugin(/** @type {import('lb/plugin').PluginDef<RequestIdConf>} */ ({
  name: 'requestId',
  api: 1, // the plugin-API version this was written for (PLUGIN_API)

  // Runs in the control plane when the config loads (and on every reload).
  // Report problems on `c` with the key path; return a usable value anyway.
  validate (c, t, path) {
    c.table(t, path, ['header', 'trust_client']) // unknown keys are problems too
    const header = c.string(t, 'header', path, 'X-Request-Id')
    if (!TOKEN.test(header)) c.problem(`${path}.header`, 'a header name', header)
    return { header: header.toLowerCase(), trustClient: c.bool(t, 'trust_client', path, true) }
  },

  // Runs in every worker, once per config generation. Do the work here, not per request.
  create (conf, env) {
    const { header, trustClient } = conf
    const drop = [header]
    env.log.debug('request ids on', { header })
    return {
      onRequest (ctx) {
        const sent = ctx.header(header)
        const id = trustClient && CLIENT_ID.test(sent) ? sent : randomUUID()
        dropRequestHeaders(ctx, drop) // the client's header is replaced, never duplicated
        addUpstreamHeaders(ctx, [header, id])
        return NEXT
      },
      onResponse (ctx, head) {
        if (findHeader(head.headers, header) >= 0) return // the upstream set its own
        const i = findHeader(ctx.upstreamHeaders ?? [], header)
        if (i >= 0) head.headers.push(header, ctx.upstreamHeaders[i])
      },
    }
  },
}))
