// An lb stopped while its runner is busy and a second lb started at
// once on the same socket path. The first one, exiting late, must not remove
// the socket file the second one made; and a socket file removed under a
// running lb is bound again.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, rmSync, unlinkSync } from 'node:fs'
import { join } from 'node:path'
import { request, startLb, type Lb } from '../helpers.js'
import { RANDOM, until } from './helpers.js'

const config = (socket: string): string => `
[entrypoints.web]
address = "127.0.0.1:{{PORT}}"

[routers.api]
rule = "PathPrefix(\`/api/\`)"
service = "gen"

[services.gen]
kind = "generate"

[generation]
socket = "${socket}"
ollama_models = "off"
restart_delay = "20ms"

[generation.models]
random = "${RANDOM}"
`

/** One generate request through `lb`; its status (a request that hangs fails the test after 20 s). */
const generate = async (lb: Lb): Promise<number> => (await request(`${lb.url}/api/generate`, {
  method: 'POST', signal: AbortSignal.timeout(20_000), body: JSON.stringify({ model: 'random', prompt: 'x', stream: false, options: { num_predict: 2 } }),
})).status

/** The pid in the last "generation runner ready" log line. */
function runnerPid (lb: Lb): number {
  const m = [...lb.log().matchAll(/"msg":"generation runner ready".*?"pid":(\d+)/g)].pop()
  assert.ok(m !== undefined, 'runner ready logged')
  return Number(m[1])
}

function killQuietly (pid: number): void {
  try { process.kill(pid, 'SIGKILL') } catch { /* already gone */ }
}

test('restart race: the old lb, exiting late, leaves the new lb\'s socket alone; a removed socket comes back', async (t) => {
  const lbs: Lb[] = []
  // Newest first: the second lb's socket lives in the first one's folder.
  t.after(async () => {
    for (const lb of lbs.reverse()) await lb.stop()
    for (const lb of lbs) rmSync(lb.dir, { recursive: true, force: true })
  })
  const a = await startLb(config('{{DIR}}/gen.sock'))
  lbs.push(a)
  const socket = join(a.dir, 'gen.sock')
  assert.equal(await generate(a), 200)
  await a.logMatching(/generation runner ready/)
  const oldRunner = runnerPid(a)
  t.after(() => killQuietly(oldRunner))

  // The old runner is busy in a way no cancel reaches: lb a will wait for it before it exits.
  process.kill(oldRunner, 'SIGSTOP')
  const aExit = a.stop('SIGTERM')
  const b = await startLb(config(socket))
  lbs.push(b)
  await b.logMatching(/generation runner ready/, 15_000)
  assert.equal(await generate(b), 200)
  assert.equal(await aExit, 0)
  assert.match(a.log(), /"msg":"stopped"/)
  // Right after the old lb exited, the socket is still the new lb's.
  assert.ok(existsSync(socket), 'the new lb\'s socket file is still there')
  assert.equal(await generate(b), 200)

  // A socket file removed under a running lb is bound again.
  unlinkSync(socket)
  await until(async () => await generate(b) === 200, 10_000, 'generate through the re-bound socket')
  assert.match(await b.logMatching(/socket file was removed/), /the generation socket file was removed; listening on it again/)
})
