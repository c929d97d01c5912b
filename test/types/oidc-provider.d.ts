// oidc-provider ships no types; the tests use only its constructor and callback().
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http'
  export default class Provider {
    constructor (issuer: string, configuration: Record<string, unknown>)
    callback (): (req: IncomingMessage, res: ServerResponse) => void
    on (event: string, listener: (...args: any[]) => void): this
    Grant: any
  }
}
