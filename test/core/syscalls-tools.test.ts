// bench/e2e/syscalls.sh's parsers on fixed inputs (no load, no timing): the
// layer split of `perf script` samples (bench/e2e/perf-layers.js) and the
// report's per-request tables from a results folder (syscalls-report.js).
// A mis-read here would put lb's CPU in the wrong layer without any error.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { ROOT } from '../helpers.js'

const E2E = join(ROOT, 'bench', 'e2e')

// five samples as `perf script` prints them: write (through ksys_write), a
// uWS-entered getpeername seen only in the entry code, lb's JIT'd JS, a
// scavenge, malloc
const SAMPLES = `node 100 1.000001:     250000 cpu-clock:ppp: 
\tffffffff81e62d01 __dev_queue_xmit+0x11 ([kernel.kallsyms])
\tffffffff816b90ea ksys_write+0xba ([kernel.kallsyms])
\tffffffff821ecc51 do_syscall_64+0x71 ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe+0x76 ([kernel.kallsyms])
\t          f838f __GI___libc_write+0x4f (/usr/lib/x86_64-linux-gnu/libc.so.6)

node 101 1.000002:     250000 cpu-clock:ppp: 
\tffffffff821ecc26 do_syscall_64+0x46 ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe+0x76 ([kernel.kallsyms])
\t          fdd6b getpeername+0xb (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t         121085 us_socket_remote_address+0x25 (/x/native/build/20.57.0/uws_linux_x64_115.node)

node 101 1.000003:     250000 cpu-clock:ppp: 
\t    7fb15b806844 JS:*#parseHead file:///repo/dist/core/upstream/response-parser.js:213:15+0x4 (/tmp/perf-100.map)
\t         14cde03 Builtins_JSEntry+0x83 (/usr/bin/node)

node 101 1.000004:     250000 cpu-clock:ppp: 
\t          c494db v8::internal::ScavengerCollector::CollectGarbage+0x12b (/usr/bin/node)

node 101 1.000005:     250000 cpu-clock:ppp: 
\t           97c24 _int_malloc+0x8c4 (/usr/lib/x86_64-linux-gnu/libc.so.6)
`

test('perf-layers.js charges each sample to its leaf layer and a kernel sample to its system call', () => {
  const out = JSON.parse(execFileSync(process.execPath, [join(E2E, 'perf-layers.js'), '/repo/dist/'], { input: SAMPLES, encoding: 'utf8' }))
  assert.equal(out.samples, 5)
  assert.deepEqual(out.layers, { kernel: 40, 'JS: the proxy\'s own': 20, 'V8 GC (C++)': 20, 'libc, libstdc++': 20 })
  assert.deepEqual(out.kernel, { write: 20, getpeername: 20 })
  assert.equal(out.entry_exit, 20)
  assert.deepEqual(out.js, { '#parseHead core/upstream/response-parser.js:213': 20 })
  assert.deepEqual(out.threads, [80, 20])
})

test('syscalls-report.js divides the calls by the requests of their own load', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'syscalls-report-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  const d = join(dir, 'floor', 'small')
  mkdirSync(d, { recursive: true })
  writeFileSync(join(dir, 'targets'), 'floor\n')
  const wrk = (n: number): string => `Running 3s test @ http://127.0.0.1:9310/\n  ${n} requests in 3.00s, 1.00MB read\n`
  writeFileSync(join(d, 'count.wrk'), wrk(10000))
  writeFileSync(join(d, 'strace.wrk'), wrk(2000))
  writeFileSync(join(d, 'strace.txt'), `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 40.00    0.100000           5      2000           write
 30.00    0.080000           4      2000           getpeername
  1.00    0.001000          10        60        22 futex
------ ----------- ----------- --------- --------- ----------------
100.00    0.181000           5      4060        22 total
`)
  writeFileSync(join(d, 'count.perf'), '# started\n\n3000,,context-switches,1,100.00,,\n<not supported>,,cycles,0,100.00,,\n' +
    '250.00,msec,task-clock,1,100.00,,\n51000,,raw_syscalls:sys_enter,1,100.00,,\n500,,syscalls:sys_enter_epoll_pwait,1,100.00,,\n')
  writeFileSync(join(d, 'count.json'), JSON.stringify({ user_ticks: 10, sys_ticks: 15, voluntary: 200, involuntary: 2800, child_ticks: 30, hz: 100, threads: 11 }))
  const snap = (ts: number, busy: number, proxy: number, backend: number): string => JSON.stringify({
    ts_ms: ts, hz: 100, ncpu: 2, sys: { busy, total: 0, steal: 0 }, groups: { proxy: { ticks: proxy }, backend: { ticks: backend } },
  })
  writeFileSync(join(d, 'count.cpu0'), snap(0, 1000, 100, 50))
  writeFileSync(join(d, 'count.cpu1'), snap(1000, 1100, 125, 60)) // 1 s: busy 1.00, proxy 0.25, backend 0.10, wrk 0.30 -> others 0.35 of 2
  writeFileSync(join(dir, 'syscost.txt'), 'batched_write 16 4.000\nbatched_read 16 3.000\nbatched_epoll_wait 16 6.400 64.0\ngetpeername 16 0.400\npingpong_write_wait_read 16 8.000\n')
  const out = execFileSync(process.execPath, [join(E2E, 'syscalls-report.js'), dir], { encoding: 'utf8' })
  assert.match(out, /median 17\.5%.*NOT quiet/)
  assert.match(out, /\| write \* \| 1\.00 \|/)
  assert.match(out, /\| getpeername \| 1\.00 \|/)
  assert.match(out, /\| futex \| 0\.03 \|/)
  assert.match(out, /\| \*\*total\*\* \| \*\*2\.03\*\* \|/)
  // 51000 calls, 500 waits, 3000 switches, 250 ms over 10000 requests; 0.25 CPU-s
  assert.match(out, /\| floor 16 B \| 10000 \| 5\.10 \| 0\.050 \| – \| 0\.300 \| 0\.020 · 0\.280 \| – \| 25\.00 \| 10\.00 · 15\.00 \| 40000 \| not in this VM \|/)
  // limit: read 3 + write 4, twice, + two waits of 6.4 µs per 64 requests = 14.2 µs; woken 16 µs
  assert.match(out, /\*\*limit 16 B\*\* \(batched · woken\) \| 14\.20 · 16\.00 \| 70423 · 62500 /)
  assert.match(out, /\| floor 16 B \| 25\.00 \| 40000 \| 0\.57 \| 10\.80 \|/)
})
