// Failures the campaign expects today, each waiting for a fix on another
// branch, keyed "generator family/failed check" (see lib/campaign.ts; the
// families are in lib/http-cases.ts, lib/ws-cases.ts and each surface's
// file). A case whose key is listed here is reported apart (count and one
// example) and does not fail its test; every other failure does. Once the
// fixes are merged, empty this list: every case must then pass. An entry that
// no case needs any more is named in the test's output ("remove it").
export interface Pending { surface: string, family: string, issue: string, why: string }

export const PENDING: readonly Pending[] = []
