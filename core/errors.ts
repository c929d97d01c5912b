// Every error the balancer can report, by code. A code's message template uses
// {name} placeholders; `status` is the HTTP status it maps to when it reaches a
// client (0 = never sent to a client). Errors that cross postMessage lose their
// class, so callers compare `err.code`, never `instanceof`.
//
// ERRORS.md documents every code; test/core/errors.test.ts checks both ways.

export const ERRORS = {
  // configuration
  LB_ERR_CONFIG_READ: { status: 0, message: 'cannot read {file}: {reason}' },
  LB_ERR_CONFIG_PARSE: { status: 0, message: '{file}: TOML syntax error: {reason}' },
  LB_ERR_CONFIG_INVALID: { status: 0, message: '{file}: invalid configuration:\n{problems}' },
  // start-up
  LB_ERR_UWS_UNSUPPORTED: { status: 0, message: 'uWebSockets.js {version} cannot run on {runtime}; lb runs on {supported}' },
  LB_ERR_LISTEN: { status: 0, message: 'cannot listen on {address} (entry point {entrypoint})' },
  LB_ERR_PATH: { status: 0, message: 'cannot write {problems}' },
  LB_ERR_STARTUP: { status: 0, message: 'start-up failed: {reason}' },
  // files lb writes (core/atomic-file.ts): the config API's state, ACME storage and certificates
  LB_ERR_NO_SPACE: { status: 507, message: 'cannot write {file} ({cause}): the file is unchanged' },
  LB_ERR_WRITE: { status: 500, message: 'cannot write {file} ({reason}): the file is unchanged' },
  // TLS, WebSocket, TCP (core/worker/listeners.ts, ws-proxy.ts, tcp-proxy.ts)
  LB_ERR_TLS: { status: 0, message: 'entry point {entrypoint}: cannot use its TLS certificates ({reason})' },
  LB_ERR_WS_BACKPRESSURE: { status: 0, message: 'WebSocket closed with 1013: more than {limit} bytes from the client waited for a slow server' },
  // ACME certificate resolvers (core/acme)
  LB_ERR_ACME: { status: 0, message: 'certificate resolver {resolver}: cannot obtain a certificate for {domains} ({reason}); retrying in {retry}' },
  LB_ERR_ACME_STORAGE: { status: 0, message: 'certificate resolver {resolver}: storage file {file} is unusable: {reason}' },
  // management surfaces (core/admin)
  LB_ERR_ADMIN_LISTEN: { status: 0, message: 'cannot listen on {address} ({surface}): {reason}' },
  LB_ERR_ADMIN_STATE: { status: 0, message: 'config API state file {file} is unusable: {reason}' },
  // data plane, answered to clients
  LB_ERR_NO_ROUTE: { status: 404, message: 'no route for this request' },
  LB_ERR_BODY_TOO_LARGE: { status: 413, message: 'request body larger than {limit} bytes' },
  // the buffering middleware read a response longer than its bound (Traefik answers 500 too)
  LB_ERR_RESPONSE_TOO_LARGE: { status: 500, message: 'response body larger than {limit} bytes (buffering middleware {middleware})' },
  LB_ERR_BAD_REQUEST: { status: 400, message: 'bad request: {reason}' },
  LB_ERR_HEAD_TOO_LARGE: { status: 431, message: 'request head of {bytes} bytes is larger than limits.max_header_bytes ({limit} bytes)' },
  // request headers refused before routing (core/worker/request/request-check.ts); each answer closes the connection
  LB_ERR_CONTENT_LENGTH: { status: 400, message: 'bad request: {reason}' },
  LB_ERR_DUPLICATE_HEADER: { status: 400, message: 'bad request: more than one {name} header' },
  LB_ERR_HEADER_CHAR: { status: 400, message: 'bad request: control character {char} in the value of header {name}' },
  LB_ERR_METHOD_NOT_IMPLEMENTED: { status: 501, message: 'not implemented: method {method} (lb forwards neither CONNECT tunnels nor TRACE)' },
  LB_ERR_TRANSFER_ENCODING: { status: 501, message: 'not implemented: Transfer-Encoding {value} (only a single "chunked" is)' },
  // request path and Host, decided before routing (core/worker/request/request-path.ts, request-host.ts)
  LB_ERR_BAD_PATH: { status: 400, message: 'bad request path: {reason}' },
  LB_ERR_BAD_HOST: { status: 400, message: 'bad request: {reason}' },
  LB_ERR_CLIENT_TIMEOUT: { status: 408, message: 'request time-out: the client stopped sending its body' },
  // what llhttp refuses on a node engine entry point before there is a request (core/worker/transport/node/engine.ts)
  LB_ERR_HEADER_TIMEOUT: { status: 408, message: 'request time-out: no complete request head within timeouts.header = {timeout}' },
  LB_ERR_HTTP_VERSION: { status: 505, message: 'HTTP version {version} is not supported: HTTP/1.1 and HTTP/1.0 are' },
  LB_ERR_SHUTDOWN: { status: 503, message: 'lb is stopping: the request did not finish within global.drain_timeout' },
  LB_ERR_NO_SERVER: { status: 503, message: 'no server available for service {service}: {why}' },
  LB_ERR_UPSTREAM_CONNECT: { status: 502, message: 'cannot connect to upstream server' },
  LB_ERR_UPSTREAM_RESET: { status: 502, message: 'upstream server closed the connection' },
  LB_ERR_UPSTREAM_PROTOCOL: { status: 502, message: 'upstream server sent an invalid response' },
  LB_ERR_UPSTREAM_TIMEOUT: { status: 504, message: 'upstream server timed out' },
  LB_ERR_FORBIDDEN: { status: 403, message: 'forbidden' },
  LB_ERR_METHOD: { status: 405, message: 'method not allowed' },
  LB_ERR_PLUGIN: { status: 500, message: 'internal error in middleware {middleware}' },
  // middlewares (plugins/)
  LB_ERR_PLUGIN_INIT: { status: 500, message: 'middleware {middleware} could not start ({reason}); its routes answer 500' },
  LB_ERR_PLUGIN_TEARDOWN: { status: 500, message: 'middleware {middleware} failed to stop ({reason})' },
  LB_ERR_RATE_LIMITED: { status: 429, message: 'Too Many Requests' },
  LB_ERR_RATE_LIMIT_UNAVAILABLE: { status: 503, message: 'rate limit {middleware} cannot count this request: the cluster\'s Redis is unreachable and the limit fails closed; try again later' },
  LB_ERR_UNAUTHORIZED: { status: 401, message: 'Unauthorized' },
  LB_ERR_AUTH_BUSY: { status: 503, message: 'too many password checks in progress ({waiting} waiting); try again later' },
  // oidc (plugins/oidc.ts)
  LB_ERR_OIDC_UNAVAILABLE: { status: 503, message: 'identity provider {issuer} is unavailable ({reason}); try again later' },
  LB_ERR_OIDC_PROVIDER: { status: 502, message: 'identity provider {issuer} failed during the login: {reason}' },
  // circuitBreaker (plugins/circuit-breaker.ts); the status is the middleware's response_code (503 by default)
  LB_ERR_CIRCUIT_OPEN: { status: 503, message: 'circuit breaker {middleware} is open: the service is failing; try again later' },
  // inFlightReq (plugins/in-flight-req.ts)
  LB_ERR_TOO_MANY_IN_FLIGHT: { status: 429, message: 'too many requests in flight from this source (at most {amount} at once)' },
  // forwardAuth (plugins/forward-auth.ts): 500 as Traefik's when the authentication server cannot answer
  LB_ERR_FORWARD_AUTH: { status: 500, message: 'the authentication server did not answer: {reason}' },
  LB_ERR_OIDC_CALLBACK: { status: 401, message: 'login refused: {reason}' },
  LB_ERR_OIDC_FORBIDDEN: { status: 403, message: 'user {user} is not allowed here: {reason}' },
  // session revocations (core/control/revocations.ts), logged
  LB_ERR_REVOCATIONS_FULL: { status: 0, message: 'the session revocation table of {node} was full (limits.session_revocations): every session born until {time} is refused and its user logs in again' },
  // generation endpoint (core/gen), answered in the caller's API shape (core/api-errors.ts): Ollama's or OpenAI's error body
  LB_ERR_GEN_PROMPT_TOO_LARGE: { status: 413, message: 'prompt of {size} bytes is larger than the limit generation.max_prompt_bytes = {limit}' },
  LB_ERR_GEN_PROMPT_TOO_LONG: { status: 400, message: 'the input is longer than the limit of {limit} tokens ({why}) and "truncate" is false' },
  LB_ERR_GEN_NUM_PREDICT: { status: 400, message: 'invalid value for "{field}": {value} is over the limit generation.max_num_predict = {limit}' },
  LB_ERR_GEN_CONTEXT_TOKEN: { status: 400, message: 'invalid value for "context": token {token} is not in the vocabulary of model {model} (ids 0 to {max})' },
  LB_ERR_GEN_TIMEOUT: { status: 504, message: 'request timed out after {seconds}s (generation.request_timeout)' },
  LB_ERR_GEN_UPSTREAM: { status: 502, message: 'model server {server} failed: {reason}' },
  LB_ERR_GEN_NO_SERVER: { status: 503, message: 'no model server serving {model} is up ({reasons})' },
  LB_ERR_GEN_RELAY_BUSY: { status: 503, message: 'the generation service did not admit the request within {ms} ms (it is busy or restarting); retry' },
  // keys and budgets (core/gen/budget/); OpenAI's body carries its own codes for them (invalid_api_key, rate_limit_exceeded)
  LB_ERR_GEN_API_KEY: { status: 401, message: '{reason}: send one of the keys of [[generation.keys]] as "Authorization: Bearer KEY"' },
  LB_ERR_GEN_OVER_BUDGET: { status: 429, message: 'consumer {consumer} is over its limit of {limit} ({used} used); retry in {seconds}s' },
  LB_ERR_GEN_BUDGET_FULL: { status: 503, message: 'consumer {consumer} has no budget record now: the {ways} consumers without a key that share its place in the budget table all have requests in flight; retry in {seconds}s' },
  LB_ERR_GEN_BUDGET_HELD: { status: 429, message: 'consumer {consumer} reached this node\'s share of its limit of {limit} ({used} used in the cluster): the other nodes hold the rest; retry in {seconds}s' },
} as const satisfies Record<string, { status: number, message: string }>

export type ErrorCode = keyof typeof ERRORS

export interface LbError extends Error {
  code: ErrorCode
  status: number
}

/** Fill a code's template; unknown placeholders stay as written. */
export function formatError (code: ErrorCode, params: Record<string, string | number> = {}): string {
  return ERRORS[code].message.replace(/\{(\w+)\}/g, (m, k: string) => (k in params ? String(params[k]) : m))
}

export function lbError (code: ErrorCode, params?: Record<string, string | number>): LbError {
  const err = new Error(formatError(code, params)) as LbError
  err.code = code
  err.status = ERRORS[code].status
  return err
}

export function isLbError (err: unknown): err is LbError {
  return typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'string' &&
    (err as { code: string }).code in ERRORS
}
