// An operator's case: lb's stderr loses its reader (journald restarted, `lb run | tee` and tee killed). lb must
// go on serving and stay idle: before, the stream's EPIPE was reported as a fault, whose log line failed again,
// and the control plane spun at 100% CPU for good.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { request, simpleConfig, sleep, startBackend, startLb } from '../helpers.js'

/** CPU seconds (user + system) the process has used so far, from /proc (clock ticks of 1/100 s). */
function cpuSeconds (pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

test('lb whose stderr reader is gone keeps serving, reloads and stops, without spinning', async () => {
  const backend = await startBackend('b')
  const lb = await startLb(simpleConfig([backend.address]))
  try {
    lb.proc.stderr!.destroy() // the reader goes away: lb's next log line gets EPIPE
    process.kill(lb.proc.pid!, 'SIGHUP') // a reload logs a few lines
    await sleep(500)
    const before = cpuSeconds(lb.proc.pid!)
    await sleep(2000)
    const used = cpuSeconds(lb.proc.pid!) - before
    // idle lb uses next to nothing; the loop took the whole 2 s
    assert.ok(used < 0.5, `lb used ${used} s of CPU in 2 s while idle`)
    assert.equal((await request(`${lb.url}/`)).status, 200)
  } finally {
    assert.equal(await lb.stop(), 0)
    await backend.close()
  }
})
