// The tables of bench/e2e/syscalls.sh from its output folder: system calls per
// request by name (strace), context switches and CPU per request (perf stat,
// /proc), CPU by layer (perf-layers.js), and the physical limit of a zero-work
// proxy from syscost.c with every proxy's requests per CPU-second as a
// fraction of it. Counts per request hold on a busy machine; times only on a
// quiet one, which the noise line says.
//
//   node bench/e2e/syscalls-report.js OUT_DIR
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

const dir = process.argv[2]
const QUIET = 5 // % of the machine used by others, median over the count loads, below which times count
const BODY = { small: '16 B', big: '4 KiB' }
const REQ_BYTES = 16 // the request side is small in both scenarios: the small payload's costs stand for it
const read = (f) => existsSync(f) ? readFileSync(f, 'utf8') : ''
const requests = (f) => Number(/(\d+) requests in/.exec(read(f))?.[1] ?? NaN)
const fmt = (x, d = 2) => Number.isFinite(x) ? x.toFixed(d) : '–'
const median = (xs) => { const s = xs.filter(Number.isFinite).sort((a, b) => a - b); return s.length === 0 ? NaN : s[Math.floor((s.length - 1) / 2)] }

/** strace -c: { name: calls } */
function strace (f) {
  const calls = {}
  for (const line of read(f).split('\n')) {
    const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$/.exec(line)
    if (m !== null && m[2] !== 'total') calls[m[2]] = Number(m[1])
  }
  return calls
}

/** perf stat -x, : { event: value } (NaN when not supported) */
function perfStat (f) {
  const ev = {}
  for (const line of read(f).split('\n')) {
    const c = line.split(',')
    if (c.length > 3 && c[2] !== '') ev[c[2]] = Number(c[0])
  }
  return ev
}

// one row per target and body
const rows = []
// the order the script measured them in, then any other folder
const order = read(join(dir, 'targets')).split(/\s+/).filter(Boolean)
for (const target of [...order, ...readdirSync(dir).filter((t) => !order.includes(t))]) {
  for (const body of ['small', 'big']) {
    const d = join(dir, target, body)
    if (!existsSync(join(d, 'count.json'))) continue
    const c = JSON.parse(read(join(d, 'count.json')))
    const n = requests(join(d, 'count.wrk'))
    const cpu0 = JSON.parse(read(join(d, 'count.cpu0')))
    const cpu1 = JSON.parse(read(join(d, 'count.cpu1')))
    const hz = cpu1.hz
    const busy = (cpu1.sys.busy - cpu0.sys.busy) / hz
    const wall = (cpu1.ts_ms - cpu0.ts_ms) / 1000
    const proxy = (cpu1.groups.proxy.ticks - cpu0.groups.proxy.ticks) / hz
    const backend = (cpu1.groups.backend.ticks - cpu0.groups.backend.ticks) / hz
    rows.push({
      target, body, n,
      count: c,
      perf: perfStat(join(d, 'count.perf')),
      strace: strace(join(d, 'strace.txt')),
      straceN: requests(join(d, 'strace.wrk')),
      layers: existsSync(join(d, 'layers.json')) ? JSON.parse(read(join(d, 'layers.json'))) : null,
      cpuS: proxy,
      otherPct: 100 * (busy - proxy - backend - c.child_ticks / c.hz) / (wall * cpu1.ncpu),
    })
  }
}
if (rows.length === 0) { console.error(`syscalls-report: no results in ${dir}`); process.exit(1) }
const col = (r) => `${r.target} ${BODY[r.body]}`
const out = []
const table = (head, lines) => {
  out.push(`| ${head.join(' | ')} |`, `|${head.map((_, i) => i === 0 ? '---' : '---:').join('|')}|`)
  for (const l of lines) out.push(`| ${l.join(' | ')} |`)
  out.push('')
}

const other = median(rows.map((r) => r.otherPct))
const quiet = other < QUIET
out.push(`Noise: CPU used by others during the count loads, median ${fmt(other, 1)}%, max ${fmt(Math.max(...rows.map((r) => r.otherPct)), 1)}% of the machine: ` +
  (quiet ? 'quiet, the time-based figures count.' : `NOT quiet (≥ ${QUIET}%): counts per request hold, times (µs, req per CPU-s, limit fractions) do not.`), '')

// 1. system calls by name
out.push('### System calls per request (strace -c -f, all threads)', '')
const UNAVOIDABLE = /^(read|readv|recvfrom|recvmsg|write|writev|sendto|sendmsg|epoll_wait|epoll_pwait)$/
const names = [...new Set(rows.flatMap((r) => Object.keys(r.strace)))]
const per = (r, s) => (r.strace[s] ?? 0) / r.straceN
const shown = names.filter((s) => rows.some((r) => per(r, s) >= 0.005)).sort((a, b) => Math.max(...rows.map((r) => per(r, b))) - Math.max(...rows.map((r) => per(r, a))))
table(['syscall', ...rows.map(col)], [
  ...shown.map((s) => [UNAVOIDABLE.test(s) ? `${s} *` : s, ...rows.map((r) => fmt(per(r, s)))]),
  ['**total**', ...rows.map((r) => `**${fmt(Object.values(r.strace).reduce((a, b) => a + b, 0) / r.straceN)}**`)],
  ['requests under strace', ...rows.map((r) => String(r.straceN))],
])
out.push('`*`: the kinds a zero-work proxy needs (read client, write upstream, read upstream, write client; epoll_wait per batch). ' +
  'strace slows the proxy, so its batches grow: epoll_wait per request is the count load\'s, below. Calls below 0.005 per request are left out ' +
  '(accept4, setsockopt and the like of wrk\'s 64 new connections).', '')

// 2. perf stat and /proc, without strace
out.push('### Per request without strace (perf stat; /proc)', '')
const p = (r, e) => r.perf[e] / r.n
/** epoll_wait and epoll_pwait: a proxy uses one of them; NaN when perf counted neither */
const epollWaits = (r) => {
  const n = ['syscalls:sys_enter_epoll_wait', 'syscalls:sys_enter_epoll_pwait'].map((e) => r.perf[e]).filter(Number.isFinite)
  return n.length === 0 ? NaN : n.reduce((a, b) => a + b, 0)
}
table(['target', 'requests', 'syscalls', 'epoll waits', 'futex', 'ctx switches', 'voluntary · involuntary', 'migrations', 'task-clock µs', 'user · sys µs', 'req per CPU-s', 'cycles · instructions'], rows.map((r) => [
  col(r), String(r.n), fmt(p(r, 'raw_syscalls:sys_enter')),
  fmt(epollWaits(r) / r.n, 3),
  fmt(p(r, 'syscalls:sys_enter_futex'), 3), fmt(p(r, 'context-switches'), 3),
  `${fmt(r.count.voluntary / r.n, 3)} · ${fmt(r.count.involuntary / r.n, 3)}`,
  fmt(p(r, 'cpu-migrations'), 4), fmt(r.perf['task-clock'] * 1000 / r.n),
  `${fmt(r.count.user_ticks / r.count.hz * 1e6 / r.n)} · ${fmt(r.count.sys_ticks / r.count.hz * 1e6 / r.n)}`,
  fmt(r.n / r.cpuS, 0),
  Number.isFinite(r.perf.cycles) ? `${fmt(p(r, 'cycles'), 0)} · ${fmt(p(r, 'instructions'), 0)}` : 'not in this VM',
]))

// 3. layers
const withLayers = rows.filter((r) => r.layers !== null && r.layers.samples > 0)
if (withLayers.length > 0) {
  out.push('### CPU by layer (perf record -g, self time of the leaf frame, % of samples)', '')
  const layerNames = [...new Set(withLayers.flatMap((r) => Object.keys(r.layers.layers)))]
  table(['layer', ...withLayers.map(col)], [
    ...layerNames.map((l) => [l, ...withLayers.map((r) => fmt(r.layers.layers[l] ?? 0, 1))]),
    ['samples', ...withLayers.map((r) => String(r.layers.samples))],
  ])
  out.push('Kernel samples by the system call they are in (% of all samples; "entry and exit" = the syscall entry/exit code itself):', '')
  const kn = [...new Set(withLayers.flatMap((r) => Object.keys(r.layers.kernel)))]
    .filter((k) => withLayers.some((r) => (r.layers.kernel[k] ?? 0) >= 0.5))
    .sort((a, b) => Math.max(...withLayers.map((r) => r.layers.kernel[b] ?? 0)) - Math.max(...withLayers.map((r) => r.layers.kernel[a] ?? 0)))
  table(['kernel path', ...withLayers.map(col)], [
    ...kn.map((k) => [k, ...withLayers.map((r) => fmt(r.layers.kernel[k] ?? 0, 1))]),
    ['(of which entry and exit)', ...withLayers.map((r) => fmt(r.layers.entry_exit, 1))],
  ])
  for (const r of withLayers.filter((x) => Object.keys(x.layers.js).length > 0)) {
    const top = Object.entries(r.layers.js).slice(0, 10).map(([k, v]) => `${k} ${fmt(v, 1)}%`)
    const nat = Object.entries(r.layers.native ?? {}).slice(0, 8).map(([k, v]) => `${k} ${fmt(v, 1)}%`)
    out.push(`- **${col(r)}**, JS functions (own unless marked): ${top.join('; ')}`)
    out.push(`  - native leaf symbols: ${nat.join('; ')}`)
    out.push(`  - % of samples per thread, busiest first: ${(r.layers.threads ?? []).filter((x) => x >= 0.5).join(', ')}`)
  }
  out.push('')
}

// 4. the physical limit
const cost = {}
for (const line of read(join(dir, 'syscost.txt')).split('\n')) {
  const [name, size, us, events] = line.split(' ')
  if (name) cost[`${name} ${size}`] = { us: Number(us), events: Number(events) }
}
if (Object.keys(cost).length > 0) {
  out.push('### The physical limit (syscost.c: µs of CPU per call on loopback TCP)', '')
  const sizes = [...new Set(Object.keys(cost).map((k) => k.split(' ')[1]))]
  table(['call', ...sizes.map((s) => `${s} B`)], [
    ['write (batched: nobody to wake)', ...sizes.map((s) => fmt(cost[`batched_write ${s}`]?.us))],
    ['read (batched)', ...sizes.map((s) => fmt(cost[`batched_read ${s}`]?.us))],
    ['epoll_wait returning 64 events', ...sizes.map((s) => fmt(cost[`batched_epoll_wait ${s}`]?.us))],
    ['getpeername (entering and leaving the kernel, about)', ...sizes.map((s) => fmt(cost[`getpeername ${s}`]?.us))],
    ['write + epoll_wait + read, one per wake-up (ping-pong, per thread)', ...sizes.map((s) => fmt(cost[`pingpong_write_wait_read ${s}`]?.us))],
  ])
  const limit = (body) => {
    const s = body === 'big' ? '4096' : '16'
    const b = (k, size) => cost[`${k} ${size}`]?.us
    const ep = cost[`batched_epoll_wait ${REQ_BYTES}`]
    // read client + write upstream (request) + read upstream + write client (response) + two waits per full batch
    const batched = b('batched_read', REQ_BYTES) + b('batched_write', REQ_BYTES) + b('batched_read', s) + b('batched_write', s) + 2 * ep.us / ep.events
    const woken = b('pingpong_write_wait_read', REQ_BYTES) + b('pingpong_write_wait_read', s)
    return { batched, woken }
  }
  out.push('A zero-work proxy per request: read client + write upstream (the request, 16 B) + read upstream + write client (the response, ' +
    'body size) + epoll_wait. Two estimates: batched = two waits per 64 requests and nobody to wake; woken = every exchange wakes a ' +
    'sleeping thread (write + wait + read per direction, no batching). The limit is the cheaper of the two.', '')
  table(['target', 'µs per request', 'req per CPU-s', '÷ limit', 'µs above the limit'], [
    ...['small', 'big'].filter((b) => rows.some((r) => r.body === b)).map((b) => {
      const l = limit(b)
      return [`**limit ${BODY[b]}** (batched · woken)`, `${fmt(l.batched)} · ${fmt(l.woken)}`, `${fmt(1e6 / l.batched, 0)} · ${fmt(1e6 / l.woken, 0)}`, '1', '0']
    }),
    ...rows.map((r) => {
      const l = Math.min(limit(r.body).batched, limit(r.body).woken)
      const us = r.cpuS * 1e6 / r.n
      return [col(r), fmt(us), fmt(r.n / r.cpuS, 0), fmt(l / us), fmt(us - l)]
    }),
  ])
}
console.log(out.join('\n'))
