// Failures the campaign expects today, each waiting for a fix on another
// branch, keyed "generator family/failed check" (see lib/campaign.ts; the
// families are in lib/http-cases.ts, lib/ws-cases.ts and each surface's
// file). A case whose key is listed here is reported apart (count and one
// example) and does not fail its test; every other failure does. Once the
// fixes are merged, empty this list: every case must then pass. An entry that
// no case needs any more is named in the test's output ("remove it").
export interface Pending { surface: string, family: string, issue: string, why: string }

export const PENDING: readonly Pending[] = [
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
  { surface: 'toml', family: 'deep/no-line', issue: '30.4', why: 'nesting deeper than 500: the error gives neither line nor key' },
  { surface: 'toml', family: 'values/no-line', issue: '30.4', why: 'an integer outside the 64-bit range: the error gives neither line nor key' },
  { surface: 'toml', family: 'lines/no-line', issue: '30.4', why: 'the same, after a line was cut' },
]
