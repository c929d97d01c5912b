// Failures the campaign expects today, each waiting for a fix on another
// branch, keyed "generator family/failed check" (see lib/campaign.ts; the
// families are in lib/http-cases.ts, lib/ws-cases.ts and each surface's
// file). A case whose key is listed here is reported apart (count and one
// example) and does not fail its test; every other failure does. Once the
// fixes are merged, empty this list: every case must then pass. An entry that
// no case needs any more is named in the test's output ("remove it").
export interface Pending { surface: string, family: string, issue: string, why: string }

const HTTP_NO_ANSWER = 'a malformed request gets neither a status line nor a close for ~10 s (uWS); nginx answers 400 at once'

export const PENDING: readonly Pending[] = [
  // raw HTTP (http.test.ts)
  { surface: 'http', family: 'cl-cl/forwarded', issue: '18.1', why: 'two Content-Length headers are forwarded, both' },
  { surface: 'http', family: 'host/forwarded', issue: '18.2, 29.3', why: 'two Host headers, or a Host that is not a host, are forwarded' },
  { surface: 'http', family: 'host/silent', issue: '18.3, 29.2', why: 'HTTP/1.1 without Host, absolute form: no answer' },
  { surface: 'http', family: 'connection/form', issue: '18.6', why: 'headers named in Connection are forwarded' },
  { surface: 'http', family: 'bare-lf/silent', issue: '18.3', why: HTTP_NO_ANSWER },
  { surface: 'http', family: 'garbage/silent', issue: '18.3', why: HTTP_NO_ANSWER },
  { surface: 'http', family: 'header-syntax/silent', issue: '18.3', why: HTTP_NO_ANSWER + ' (space before colon, obs-fold, NUL, CR)' },
  { surface: 'http', family: 'header-syntax/forwarded', issue: '18.3, 29.3', why: 'an empty header name or a DEL byte is forwarded' },
  { surface: 'http', family: 'control-bytes/silent', issue: '18.3', why: HTTP_NO_ANSWER },
  { surface: 'http', family: 'control-bytes/forwarded', issue: '18.3, 29.3', why: 'a control or DEL byte in a header value is forwarded' },
  { surface: 'http', family: 'control-bytes/path-form', issue: '29.1', why: 'raw control and non-ASCII bytes in the path are forwarded' },
  { surface: 'http', family: 'mutation/silent', issue: '18.3', why: HTTP_NO_ANSWER },
  { surface: 'http', family: 'mutation/unanswered', issue: '18.3', why: 'an unknown method (e.g. "PST") is closed without a status line; nginx forwards it' },
  { surface: 'http', family: 'mutation/forwarded', issue: '18.3, 29.3', why: 'a damaged header line is forwarded where nginx answers 400' },
  { surface: 'http', family: 'mutation/path-form', issue: '29.1', why: 'a damaged path is forwarded as is' },
  { surface: 'http', family: 'chunk-size/forwarded', issue: '18.3', why: 'bad chunk sizes (" 5", "5;", "g", empty) are read and forwarded; nginx answers 400' },
  { surface: 'http', family: 'cl-value/forwarded', issue: '18.3', why: 'a Content-Length with a tab or odd syntax is read and forwarded; nginx answers 400' },
  { surface: 'http', family: 'te-te/silent', issue: '18.3, 29.3', why: 'obfuscated Transfer-Encoding: no answer; nginx answers 400 or 501' },
  { surface: 'http', family: 'te-te/unanswered', issue: '18.3, 29.3', why: 'Transfer-Encoding "chunkeD" is closed without a status line; nginx reads it' },
  { surface: 'http', family: 'version/silent', issue: '29.2, 18.3', why: 'HTTP/1.0 and HTTP/0.9 and bad versions get no answer' },
  { surface: 'http', family: 'request-line/silent', issue: '29.2, 18.3', why: 'absolute form, OPTIONS *, tabs or double spaces in the request line: no answer' },
  { surface: 'http', family: 'request-line/unanswered', issue: '29.2', why: 'a request line nginx serves is closed without a status line' },
  { surface: 'http', family: 'path/path-form', issue: '29.1', why: 'dot segments, escaped unreserved characters and ambiguous escapes are forwarded as is' },
  { surface: 'http', family: 'path/forwarded', issue: '29.1', why: '%00, a bad escape ("%zz", "%") is forwarded; nginx answers 400' },
  { surface: 'http', family: 'path/silent', issue: '29.1, 29.2', why: 'raw control bytes or a space in the path, "*" or no path: no answer' },
  { surface: 'http', family: 'limits/unanswered', issue: '18.3', why: 'found by this campaign: a header line between about 70 KB and 200 KB is closed without a status line (uWS limit); nginx (128 KB buffers here) serves some of them, and lb should answer 431' },
  { surface: 'http', family: 'limits/silent', issue: '18.3', why: 'found by this campaign: more than about 47 header lines get no answer for ~10 s (uWS limit); nginx serves 120' },
  // WebSocket (ws.test.ts)
  { surface: 'ws', family: 'unmasked/open', issue: '29.3', why: 'an unmasked client frame leaves the session open' },
  { surface: 'ws', family: 'fragment-error/open', issue: '29.3', why: 'a new data frame inside an unfinished message leaves the session open' },
  { surface: 'ws', family: 'close-code/close-code', issue: '29.3', why: 'found by this campaign: a close frame with an invalid code or a 1-byte body is answered with an empty close frame, not 1002' },
  // management (config-api.test.ts, runtime-socket.test.ts)
  { surface: 'config-api', family: 'config-path/crash', issue: '30.0', why: 'a malformed escape in a management path aborts the process' },
  { surface: 'config-api', family: 'config-path/unanswered', issue: '30.0', why: 'the same, seen from the request' },
  { surface: 'config-api', family: 'dashboard-path/crash', issue: '30.0', why: 'a malformed escape in a dashboard path aborts the process' },
  { surface: 'config-api', family: 'dashboard-path/unanswered', issue: '30.0', why: 'the same, seen from the request' },
  { surface: 'config-api', family: 'dashboard-path/5xx', issue: '30.0', why: 'a bad dashboard path answers 5xx' },
  { surface: 'config-api', family: 'backend-body/crash', issue: '30.0', why: 'a malformed escape in the path of a backend write aborts the process' },
  { surface: 'config-api', family: 'backend-body/unanswered', issue: '30.0', why: 'the same, seen from the request' },
  { surface: 'config-api', family: 'server-body/crash', issue: '30.0', why: 'a malformed escape in the path of a server write aborts the process' },
  { surface: 'config-api', family: 'server-body/unanswered', issue: '30.0', why: 'the same, seen from the request' },
  { surface: 'config-api', family: 'runtime-body/crash', issue: '30.0', why: 'a malformed escape in a runtime server path aborts the process' },
  { surface: 'config-api', family: 'runtime-body/unanswered', issue: '30.0', why: 'the same, seen from the request' },
  { surface: 'runtime-socket', family: 'command/unanswered', issue: 'found by this campaign (no issue yet)', why: 'runtime socket: "show sess" then end of input (echo ... | socat) closes without the reply: the reply is asynchronous and the socket is ended first' },
  { surface: 'runtime-socket', family: 'many-commands/unanswered', issue: 'found by this campaign (no issue yet)', why: 'the same, on a line with several commands' },
  // generation (gen.test.ts)
  { surface: 'gen-cost', family: 'cost/5xx', issue: '18.4', why: 'a 1-4 MB prompt or num_predict 1e9 runs until request_timeout (504) instead of a 400/413 before any model work' },
  // configuration (toml.test.ts)
  { surface: 'toml', family: 'deep/no-line', issue: '30.4', why: 'nesting deeper than 500: the error gives neither line nor key' },
  { surface: 'toml', family: 'values/no-line', issue: '30.4', why: 'an integer outside the 64-bit range: the error gives neither line nor key' },
  { surface: 'toml', family: 'lines/no-line', issue: '30.4', why: 'the same, after a line was cut' },
]
