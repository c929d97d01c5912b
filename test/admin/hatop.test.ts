// Debian's hatop (0.8.2, package "hatop") against the runtime socket, as an
// operator runs it: in a terminal (tmux), switching views with the keys 1 to
// 5 and reading the screen. hatop refuses to start when `show info` lacks a
// field it reads (Release_date, Maxpipes, PipesUsed, Tasks, Run_queue, ...),
// and parses `show stat` by HAProxy's column positions.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { test } from 'node:test'
import { getMany, sleep } from '../helpers.js'
import { backends, requireTool, sock, startAdminLb } from './util.js'

test('hatop: every view renders lb\'s runtime socket', { timeout: 60_000 }, async (t) => {
  if (requireTool(t, 'hatop', 'hatop') === null || requireTool(t, 'tmux', 'tmux') === null) return
  const [b1, b2] = await backends(2)
  const config = `[entrypoints.web]
address = "127.0.0.1:{{PORT}}"
[routers.web]
rule = "PathPrefix(\`/\`)"
service = "web"
[services.web]
[[services.web.servers]]
name = "s1"
address = "${b1!.address}"
[[services.web.servers]]
name = "s2"
address = "${b2!.address}"
[services.web.health_check]
interval = "200ms"
`
  const a = await startAdminLb(config)
  // a tmux server of its own, so the test never touches a user's sessions
  const tmuxSocket = `lb-hatop-${process.pid}`
  const tmux = (...args: string[]): string => execFileSync('tmux', ['-L', tmuxSocket, ...args], { encoding: 'utf8' })
  t.after(async () => {
    try { tmux('kill-server') } catch { /* already gone */ }
    await a.lb.stop()
    await b1!.close()
    await b2!.close()
  })
  await getMany(a.lb.url, 20)
  await sock(a.sock, 'set server web/s2 state drain')
  tmux('new-session', '-d', '-s', 'hatop', '-x', '160', '-y', '40', `hatop -s ${a.sock}; echo HATOP-EXITED; sleep 30`)
  const screen = (): string => tmux('capture-pane', '-p', '-t', 'hatop')
  const waitFor = async (re: RegExp, what: string): Promise<string> => {
    const deadline = Date.now() + 10_000
    let s = screen()
    while (!re.test(s)) {
      if (/HATOP-EXITED/.test(s)) assert.fail(`hatop exited (${what}):\n${s}`)
      if (Date.now() > deadline) assert.fail(`${what}: not on the screen:\n${s}`)
      await sleep(100)
      s = screen()
    }
    return s
  }
  // a view's header can be on the screen before curses has redrawn its rows (CI once read view 1's rows under
  // view 2's header): a view is read once two captures 100 ms apart agree
  const view = async (key: string, re: RegExp, what: string): Promise<string> => {
    tmux('send-keys', '-t', 'hatop', key)
    let s = await waitFor(re, what)
    for (const deadline = Date.now() + 5_000; Date.now() < deadline;) {
      await sleep(100)
      const next = screen()
      if (next === s && re.test(s)) break
      s = next
    }
    return s
  }

  // the header reads show info: name, version, release date, pid, node, uptime, connections and pipes
  let s = await waitFor(/1-STATUS/, 'status view')
  assert.match(s, /HATop version 0\.8\.2/)
  assert.match(s, /lb Version: 0\.1\.0 +\(released: \d{4}\/\d\d\/\d\d\) +PID: \d+ \(proc 1\)/, 'name, version, release date, pid')
  assert.match(s, /Node: \S+ \(uptime \dd \dh\d\dm\d\ds\)/)
  assert.match(s, /Pipes: \[ +0\/0\]/, 'no pipes: lb does not splice')
  assert.match(s, /Connections: \[ +\d+\/100000\]/, 'CurrConns / Maxconn')
  assert.match(s, /Procs: +1 +Tasks: +\d+ +Queue: +\d+ +Proxies: +2 +Services: +4/)
  // 1 STATUS: the frontend, both servers with weight, state and check, the backend
  s = await waitFor(/s2 +1 DRAIN +L7OK/, 's2 in drain')
  assert.match(s, /FRONTEND +0 OPEN/)
  assert.match(s, /s1 +1 UP +L7OK +1 +0/, 's1 up, weight 1, check passed, active')
  assert.match(s, /BACKEND +1 UP +1 +0/, 'the backend: weight and active servers left after the drain')

  // 2 TRAFFIC: lbtot per server and bytes
  s = await view('2', /NAME +W STATUS +LBTOT +RATE +RLIM +RMAX +BIN +BOUT/, 'traffic view')
  assert.match(s, /s1 +1 UP +10 /, `s1 picked 10 times:\n${s}`)
  assert.match(s, /BACKEND +1 UP +20 /)
  // 3 HTTP: responses by class
  s = await view('3', /NAME +W STATUS +RATE +RMAX +RTOT +1xx +2xx +3xx +4xx +5xx +\?xx/, 'http view')
  assert.match(s, /FRONTEND +0 OPEN +\d+ +\d+ +20 +0 +20 +0 +0 +0 +0/, `20 requests, all 2xx:\n${s}`)
  assert.match(s, /BACKEND +1 UP +\d+ +\d+ +20 +0 +20 +0 +0 +0 +0/)
  // 4 ERRORS: check status, failures, downtime
  s = await view('4', /NAME +W STATUS +CHECK +CF +CD +CL +ECONN +EREQ +ERSP +DREQ +DRSP +DOWN/, 'errors view')
  assert.match(s, /s1 +1 UP +L7OK +0 +0 +\d+s +0 +0 +0 +0 +0 +0s/, `s1: no failed check, never down:\n${s}`)
  // 5 CLI: a command typed into hatop's shell is answered through the socket
  await view('5', /Welcome on the embedded interactive HAProxy shell/, 'cli view')
  tmux('send-keys', '-t', 'hatop', 'get weight web/s1', 'Enter')
  await waitFor(/> get weight web\/s1\n1 \(initial 1\)/, 'a CLI command\'s answer')
  tmux('send-keys', '-t', 'hatop', 'Escape', '1')
  s = await waitFor(/NAME +W STATUS +CHECK +ACT/, 'back to the status view')
  assert.doesNotMatch(s, /HATOP-EXITED/)
})
