// HAProxy's text formats for the runtime socket: `show info` (Name: value
// lines in HAProxy's field order, fields without a value skipped), `show stat`
// (the 119-column CSV with its "# " header, the "-," delimiter after the static
// columns and a trailing comma on every line, so tools that read HAProxy's
// stats socket parse it unchanged) and `show servers state` (`show sess`: show-sess.ts).
import { readFileSync } from 'node:fs'
import { hostname } from 'node:os'
import type { ServiceConf } from '../../config/dynamic.js'
import {
  C_BYTES_IN, C_BYTES_OUT, C_CONN_ERR, C_RESP_1XX, C_RESP_ERR, C_RETRIES, C_SELECTED, EC_OPEN, EC_PEAK, EP_ACCEPTS, G_ACCEPTS, G_BYTES_OUT,
  G_REQUESTS, G_WRITING, H_CONN_ACTIVE, T_BYTES_IN, T_BYTES_OUT, T_HEAD_IN, T_HEAD_OUT, T_SUM,
} from '../../shm/layout.js'
import { epConnBase, sumEntryPoint, sumGlobal, sumServer } from '../../shm/counters.js'
import { epRow, responseClasses, serverTimes, sumTimeBlock } from '../../shm/request-stats.js'
import type { AdminContext } from '../context.js'
import { RELEASE_DATE, VERSION } from '../context.js'
import { serverView } from '../server-view.js'

export const STAT_COLUMNS = ('pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight,' +
  'act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,lbtot,tracked,type,rate,rate_lim,rate_max,check_status,' +
  'check_code,check_duration,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,hanafail,req_rate,req_rate_max,req_tot,' +
  'cli_abrt,srv_abrt,comp_in,comp_out,comp_byp,comp_rsp,lastsess,last_chk,last_agt,qtime,ctime,rtime,ttime,agent_status,' +
  'agent_code,agent_duration,check_desc,agent_desc,check_rise,check_fall,check_health,agent_rise,agent_fall,agent_health,addr,' +
  'cookie,mode,algo,conn_rate,conn_rate_max,conn_tot,intercepted,dcon,dses,wrew,connect,reuse,cache_lookups,cache_hits,' +
  'srv_icur,src_ilim,qtime_max,ctime_max,rtime_max,ttime_max,eint,idle_conn_cur,safe_conn_cur,used_conn_cur,need_conn_est,' +
  'uweight,agg_server_status,agg_server_status_check,agg_check_status,srid,sess_other,h1_sess,h2_sess,h3_sess,req_other,' +
  'h1req,h2req,h3req,proto,priv_idle_cur,reqbin,reqbout,resbin,resbout,cache_hint_hits').split(',')

const COL = new Map(STAT_COLUMNS.map((c, i) => [c, i]))

type Row = Record<string, string | number>

function csvField (v: string | number | undefined): string {
  if (v === undefined) return ''
  const s = String(v)
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s
}

function csvLine (row: Row): string {
  const cells = new Array<string>(STAT_COLUMNS.length).fill('')
  for (const [k, v] of Object.entries(row)) cells[COL.get(k)!] = csvField(v)
  return cells.join(',') + ',-,'
}

export const STAT_HEADER = `# ${STAT_COLUMNS.join(',')},-,`

const CHECK_DESC: Record<string, string> = {
  UNK: 'unknown', INI: 'initializing', L4OK: 'Layer4 check passed', L4CON: 'Layer4 connection problem', L4TOUT: 'Layer4 timeout',
  L7OK: 'Layer7 check passed', L7STS: 'Layer7 wrong status', L7TOUT: 'Layer7 timeout', L7RSP: 'Layer7 invalid response',
}

/** HAProxy's enum healthcheck_status numbers (srv_check_status in `show servers state`) */
// (a server without checks stays at INI, 1)
const HCHK_STATUS: Record<string, number> = { UNK: 0, INI: 1, L4OK: 6, L4TOUT: 7, L4CON: 8, L7TOUT: 12, L7RSP: 13, L7OK: 15, L7STS: 17 }

const TYPE_FE = 1
const TYPE_BE = 2
const TYPE_SV = 4

export interface StatFilter {
  /** proxy name or iid; null = all */
  readonly proxy: string | null
  /** bitmask of 1 frontend, 2 backend, 4 server; -1 = all */
  readonly types: number
  /** server id; -1 = all */
  readonly sid: number
  /** `up`: only servers UP; `no-maint`: hide servers in maintenance */
  readonly up: boolean
  readonly noMaint: boolean
}

export const ALL_STATS: StatFilter = { proxy: null, types: -1, sid: -1, up: false, noMaint: false }

/** `show stat` body lines (header first), as HAProxy writes them. */
export function showStat (ctx: AdminContext, f: StatFilter): string[] {
  const config = ctx.config()
  const shm = ctx.shm
  const lines = [STAT_HEADER]
  const want = (name: string, iid: number, type: number): boolean =>
    (f.proxy === null || f.proxy === name || f.proxy === String(iid)) && (f.types === -1 || (f.types & type) !== 0)
  // entry points are frontends; iids: entry points first, then services, from 1 in config order
  config.entrypoints.forEach((ep, i) => {
    const iid = i + 1
    if (!want(ep.name, iid, TYPE_FE)) return
    const row = sumTimeBlock(shm, epRow(i))
    // the duration buckets, +Inf included, count every request once
    const requests = row.subarray(0, T_SUM).reduce((n, x) => n + x, 0)
    const fs = ctx.sampler.frontends.get(ep.name)
    // lb makes one session per connection, as HAProxy: sessions and connections are the same counts
    const accepts = sumEntryPoint(shm, i, EP_ACCEPTS)
    const conn = fs?.conn
    const h = responseClasses(shm, i)
    lines.push(csvLine({
      pxname: ep.name, svname: 'FRONTEND', scur: Atomics.load(shm.i32, epConnBase(i) + EC_OPEN), smax: Atomics.load(shm.i32, epConnBase(i) + EC_PEAK),
      slim: config.global.maxConnections, stot: accepts, bin: row[T_HEAD_IN]! + row[T_BYTES_IN]!, bout: row[T_HEAD_OUT]! + row[T_BYTES_OUT]!,
      status: 'OPEN', pid: 1, iid, sid: 0, type: 0,
      rate: conn?.cur ?? 0, rate_lim: 0, rate_max: conn?.max ?? 0, conn_rate: conn?.cur ?? 0, conn_rate_max: conn?.max ?? 0, conn_tot: accepts,
      req_rate: fs?.req.cur ?? 0, req_rate_max: fs?.req.max ?? 0,
      hrsp_1xx: h[0]!, hrsp_2xx: h[1]!, hrsp_3xx: h[2]!, hrsp_4xx: h[3]!, hrsp_5xx: h[4]!, hrsp_other: h[5]!,
      req_tot: requests, mode: 'http', proto: 'http',
    }))
  })
  config.services.forEach((svc, si) => {
    if (svc.kind !== 'proxy') return
    const iid = config.entrypoints.length + si + 1
    if (f.proxy !== null && f.proxy !== svc.name && f.proxy !== String(iid)) return
    let act = 0
    let totals = { weight: 0, inflight: 0, lbtot: 0, bin: 0, bout: 0, econ: 0, eresp: 0, wretr: 0, h: [0, 0, 0, 0, 0] }
    // the backend's averages: its servers' weighted by the requests each measured
    const times = { ct: 0, rt: 0, tt: 0, n: 0 }
    svc.servers.forEach((srv, k) => {
      const v = serverView(ctx, svc, srv)
      const slot = v.slot
      const sum = (id: number): number => (slot < 0 ? 0 : sumServer(shm, slot, id))
      const h = [0, 1, 2, 3, 4].map((x) => sum(C_RESP_1XX + x))
      // each counter is summed over the stripes once, for both this server's line and the backend's
      const selected = sum(C_SELECTED)
      const bytesIn = sum(C_BYTES_IN)
      const bytesOut = sum(C_BYTES_OUT)
      const connErr = sum(C_CONN_ERR)
      const respErr = sum(C_RESP_ERR)
      const retries = sum(C_RETRIES)
      const tm = slot < 0 ? null : serverTimes(shm, slot)
      if (tm !== null) { times.ct += tm.ctime * tm.samples; times.rt += tm.rtime * tm.samples; times.tt += tm.ttime * tm.samples; times.n += tm.samples }
      const usable = v.healthy && v.admin === 'ready' && v.weight > 0
      if (usable) { act++; totals.weight += v.weight }
      totals = { ...totals, inflight: totals.inflight + v.inflight, lbtot: totals.lbtot + selected, bin: totals.bin + bytesIn, bout: totals.bout + bytesOut, econ: totals.econ + connErr, eresp: totals.eresp + respErr, wretr: totals.wretr + retries, h: totals.h.map((x, j) => x + h[j]!) }
      if (!want(svc.name, iid, TYPE_SV) || (f.sid !== -1 && f.sid !== k + 1)) return
      if (f.up && v.status !== 'UP' && v.status !== 'no check') return
      if (f.noMaint && v.admin === 'maint') return
      const hc = svc.healthCheck
      const health = v.healthy ? hc.rise + hc.fall - 1 : Math.max(0, Math.min(hc.rise - 1, v.streak))
      const ss = ctx.sampler.servers.get(`${svc.name}/${srv.name}`)
      lines.push(csvLine({
        pxname: svc.name, svname: srv.name, qcur: 0, qmax: 0, scur: v.inflight, smax: Math.max(ss?.smax ?? 0, v.inflight), slim: '', stot: selected, bin: bytesIn, bout: bytesOut,
        dresp: 0, econ: connErr, eresp: respErr, wretr: retries, wredis: 0, status: v.status, weight: v.weight,
        act: 1, bck: 0, ...(srv.check ? { chkfail: v.checkFails, downtime: Math.floor((ss?.downMs ?? 0) / 1000) } : {}), chkdown: v.downCount,
        lastchg: v.sinceChangeSec, pid: 1, iid, sid: k + 1, lbtot: selected,
        type: 2, rate: ss?.rate.cur ?? 0, rate_max: ss?.rate.max ?? 0, lastsess: since(ss?.lastSessAt ?? 0),
        qtime: 0, ctime: Math.round(tm?.ctime ?? 0), rtime: Math.round(tm?.rtime ?? 0), ttime: Math.round(tm?.ttime ?? 0),
        ...(srv.check ? { check_status: v.checkStatus, check_code: v.checkCode || '', check_duration: v.checkMs, check_desc: CHECK_DESC[v.checkStatus] ?? '', check_rise: hc.rise, check_fall: hc.fall, check_health: health } : {}),
        hrsp_1xx: h[0]!, hrsp_2xx: h[1]!, hrsp_3xx: h[2]!, hrsp_4xx: h[3]!, hrsp_5xx: h[4]!, hrsp_other: 0,
        addr: srv.path !== '' ? `unix:${srv.path}` : `${srv.host}:${srv.port}`, mode: 'http', uweight: v.weight, srid: k + 1,
      }))
    })
    if (!want(svc.name, iid, TYPE_BE)) return
    const bs = ctx.sampler.backends.get(svc.name)
    lines.push(csvLine({
      pxname: svc.name, svname: 'BACKEND', qcur: 0, qmax: 0, scur: totals.inflight, smax: Math.max(bs?.smax ?? 0, totals.inflight), stot: totals.lbtot,
      bin: totals.bin, bout: totals.bout, dreq: 0, dresp: 0,
      econ: totals.econ, eresp: totals.eresp, wretr: totals.wretr, wredis: 0, status: act > 0 ? 'UP' : 'DOWN', weight: totals.weight, act, bck: 0,
      chkdown: bs?.downs ?? 0, downtime: Math.floor((bs?.downMs ?? 0) / 1000),
      pid: 1, iid, sid: 0, lbtot: totals.lbtot, type: 1, rate: bs?.rate.cur ?? 0, rate_max: bs?.rate.max ?? 0, lastsess: since(bs?.lastSessAt ?? 0),
      qtime: 0, ctime: avg(times.ct, times.n), rtime: avg(times.rt, times.n), ttime: avg(times.tt, times.n),
      hrsp_1xx: totals.h[0]!, hrsp_2xx: totals.h[1]!, hrsp_3xx: totals.h[2]!, hrsp_4xx: totals.h[3]!,
      hrsp_5xx: totals.h[4]!, hrsp_other: 0, req_tot: totals.lbtot, mode: 'http', algo: svc.balance, uweight: totals.weight,
    }))
  })
  return lines
}

const avg = (sum: number, n: number): number => (n === 0 ? 0 : Math.round(sum / n))

/** HAProxy's lastsess: seconds since `at` (ms epoch), -1 for never. */
function since (at: number): number {
  return at === 0 ? -1 : Math.max(0, Math.floor((Date.now() - at) / 1000))
}

function uptime (sec: number): string {
  const d = Math.floor(sec / 86400)
  const h = Math.floor((sec % 86400) / 3600)
  const m = Math.floor((sec % 3600) / 60)
  const s = sec % 60
  return `${d}d ${h}h${String(m).padStart(2, '0')}m${String(s).padStart(2, '0')}s`
}

/** The soft limit on open files of this process (HAProxy's Ulimit-n), 0 when /proc does not say. */
function openFilesLimit (): number {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'latin1'))
    return m === null || m[1] === 'unlimited' ? 0 : Number(m[1])
  } catch {
    return 0
  }
}

/**
 * `show info` lines: HAProxy 2.6's fields in its order (its TotalSplicdedBytesOut
 * spelling included), each with lb's value of the same meaning. Fields lb has
 * no measure of are skipped, as HAProxy skips fields without a value, rather
 * than printed as a zero that is not true: the TLS handshake and session-cache
 * fields when an https entry point exists (key rates, session reuse, cache
 * lookups and misses: uWS shows nothing of a handshake), compression
 * throughput and DNS failures. The README's surfaces section lists what each
 * value means in lb.
 */
export function showInfo (ctx: AdminContext): string[] {
  const c = ctx.config()
  const shm = ctx.shm
  const sm = ctx.sampler
  const up = Math.floor((Date.now() - ctx.startedAt) / 1000)
  const mem = process.memoryUsage()
  const conns = Atomics.load(shm.i32, H_CONN_ACTIVE)
  const listeners = c.entrypoints.length
  const inProgress = sumGlobal(shm, G_WRITING)
  const ulimit = openFilesLimit()
  // the SSL connections are the client connections of the https entry points
  let sslOpen = 0
  let sslAccepts = 0
  c.entrypoints.forEach((e, i) => {
    if (e.tls === null) return
    sslOpen += Atomics.load(shm.i32, epConnBase(i) + EC_OPEN)
    sslAccepts += sumEntryPoint(shm, i, EP_ACCEPTS)
  })
  // MaxSslConns is HAProxy's maxsslconn, 0 for none: lb has no SSL-specific cap (global.max_connections holds)
  const ssl: Array<[string, number]> = [['MaxSslConns', 0], ['CurrSslConns', sslOpen], ['CumSslConns', sslAccepts]]
  // with no TLS entry point there is no handshake: zero is then the truth
  const noTls = c.entrypoints.every((e) => e.tls === null)
  const handshakes = (f: Array<[string, number]>): Array<[string, number]> => noTls ? f : []
  const sslRates: Array<[string, number]> = [
    ['SslRate', sm.ssl.cur], ['SslRateLimit', 0], ['MaxSslRate', sm.ssl.max],
    ...handshakes([['SslFrontendKeyRate', 0], ['SslFrontendMaxKeyRate', 0], ['SslFrontendSessionReuse_pct', 0]]),
    // full handshakes with servers (not resumed) per second, over the last second, and the peak: HAProxy's keys computed on server connections
    ['SslBackendKeyRate', sm.sslBackendKeys.cur], ['SslBackendMaxKeyRate', sm.sslBackendKeys.max],
    ...handshakes([['SslCacheLookups', 0], ['SslCacheMisses', 0]]),
  ]
  const fields: Array<[string, string | number]> = [
    ['Name', 'lb'], ['Version', VERSION], ['Release_date', RELEASE_DATE], ['Nbthread', shm.workers], ['Nbproc', 1], ['Process_num', 1],
    ['Pid', process.pid], ['Uptime', uptime(up)], ['Uptime_sec', up],
    ['Memmax_MB', 0], ['PoolAlloc_MB', Math.round(mem.rss / 1048576)], ['PoolUsed_MB', Math.round(mem.heapUsed / 1048576)], ['PoolFailed', 0],
    ['Ulimit-n', ulimit], ['Maxsock', ulimit],
    ['Maxconn', c.global.maxConnections], ['Hard_maxconn', c.global.maxConnections], ['CurrConns', conns],
    ['CumConns', sumGlobal(shm, G_ACCEPTS)], ['CumReq', sumGlobal(shm, G_REQUESTS)],
    ...ssl,
    // lb does not splice: no pipe is ever used
    ['Maxpipes', 0], ['PipesUsed', 0], ['PipesFree', 0],
    ['ConnRate', sm.conn.cur], ['ConnRateLimit', 0], ['MaxConnRate', sm.conn.max],
    ['SessRate', sm.conn.cur], ['SessRateLimit', 0], ['MaxSessRate', sm.conn.max],
    ...sslRates,
    ['CompressBpsRateLim', 0],
    // every open connection and listener is a task; the ones running are the requests being processed
    ['Tasks', conns + listeners + inProgress], ['Run_queue', inProgress], ['Idle_pct', sm.idlePct],
    ['node', hostname()], ['Stopping', 0], ['Jobs', conns + listeners], ['Unstoppable Jobs', 0], ['Listeners', listeners],
    ['ActivePeers', 0], ['ConnectedPeers', 0], ['DroppedLogs', 0], ['BusyPolling', 0],
    ['TotalBytesOut', sumGlobal(shm, G_BYTES_OUT)], ['TotalSplicdedBytesOut', 0], ['BytesOutRate', sm.bytesOut.cur],
    ['DebugCommandsIssued', 0], ['CumRecvLogs', 0], ['Build info', VERSION],
    ['Memmax_bytes', 0], ['PoolAlloc_bytes', mem.rss], ['PoolUsed_bytes', mem.heapUsed], ['Start_time_sec', Math.floor(ctx.startedAt / 1000)],
    ['Tainted', 0],
    // later HAProxy versions' fields, and lb's own TotalBytesIn: what the FRONTENDs' bin add up to
    ['TotalBytesIn', bytesIn(ctx)], ['CurrStreams', inProgress], ['CumStreams', sumGlobal(shm, G_REQUESTS)], ['NbThreadGroups', 1],
  ]
  return fields.map(([k, v]) => `${k}: ${v}`)
}

/** Bytes received from clients: every entry point's request heads as received and bodies (FRONTEND bin). */
function bytesIn (ctx: AdminContext): number {
  let n = 0
  for (let i = 0; i < ctx.config().entrypoints.length; i++) {
    const row = sumTimeBlock(ctx.shm, epRow(i))
    n += row[T_HEAD_IN]! + row[T_BYTES_IN]!
  }
  return n
}

export const SERVERS_STATE_HEADER = '# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight ' +
  'srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id ' +
  'srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port'

/** `show servers state [<backend>]`: "1", the header, one row per server. null when the backend does not exist. */
export function showServersState (ctx: AdminContext, backend: string | null): string[] | null {
  const config = ctx.config()
  const services = config.services.map((s, i) => ({ s, id: config.entrypoints.length + i + 1 })).filter(({ s }) => s.kind === 'proxy')
  const chosen = backend === null ? services : services.filter(({ s, id }) => s.name === backend || `#${id}` === backend)
  if (backend !== null && chosen.length === 0) return null
  const lines = ['1', SERVERS_STATE_HEADER]
  for (const { s, id } of chosen) lines.push(...serverStateRows(ctx, s, id))
  return lines
}

function serverStateRows (ctx: AdminContext, svc: ServiceConf, beId: number): string[] {
  return svc.servers.map((srv, k) => {
    const v = serverView(ctx, svc, srv)
    // srv_admin_state bits: 0x01 forced maint, 0x04 config maint, 0x08 forced drain
    const adminBits = v.admin === 'maint' ? (srv.maintenance ? 0x04 : 0x01) : v.admin === 'drain' ? 0x08 : 0
    // drain takes the server out of balancing but it stays running (HAProxy: SRV_ST_RUNNING = 2)
    const opState = v.healthy ? 2 : 0
    const hc = svc.healthCheck
    const health = v.checkUp ? hc.rise + hc.fall - 1 : Math.max(0, Math.min(hc.rise - 1, v.streak))
    const result = !srv.check ? 0 : v.checkStatus === 'L7OK' ? 3 : v.checkStatus === 'UNK' ? 0 : 2
    const checkState = srv.check ? 6 : 0 // CHK_ST_CONFIGURED | CHK_ST_ENABLED
    const addr = srv.path !== '' ? srv.path : srv.host
    return [beId, svc.name, k + 1, srv.name, addr, opState, adminBits, v.weight, srv.weight, v.sinceChangeSec, srv.check ? HCHK_STATUS[v.checkStatus] ?? 0 : 1, result, health, checkState,
      0, 0, 0, '-', srv.path !== '' ? 0 : srv.port, '-', 0, 0, '-', '-', 0].join(' ')
  })
}
