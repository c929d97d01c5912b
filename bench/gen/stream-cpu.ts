// CPU spent per generated token by the API process (with its HTTP client)
// and by the runner process, streamed and not, for a given stream_batch.
// CPU time is less sensitive than wall time to other load on the machine.
//
//   node dist/bench/gen/stream-cpu.js [--stream-batch 50ms] [model.gguf]

import { readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { request } from 'undici'
import { Checker } from '../../core/config/check.js'
import { checkGeneration } from '../../core/gen/config.js'
import { startGeneration } from '../../core/gen/service.js'
import { createLogger } from '../../core/log.js'

const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..', '..')
const args = process.argv.slice(2)
const MODEL = args.find((a) => a.endsWith('.gguf')) ?? resolve(REPO, '..', 'shared', 'models', 'stories260K.gguf')
const BATCH = args.includes('--stream-batch') ? args[args.indexOf('--stream-batch') + 1]! : '50ms'
const REQUESTS = 10
const TOKENS = 400

const dir = await mkdtemp(join(tmpdir(), 'lb-bench-cpu-'))
const c = new Checker()
const conf = checkGeneration(c, {
  socket: 'gen.sock', listen: '127.0.0.1:0', ollama_models: 'off', builtin_model: false, num_ctx: 1024, stream_batch: BATCH, models: { m: MODEL },
}, 'generation', dir)
if (c.problems.length > 0) throw new Error(c.problems.join('\n'))
const svc = await startGeneration(conf, createLogger('error'))
await svc.ready()
const base = `http://127.0.0.1:${svc.tcpAddress!.port}`

/** utime + stime of the runner process, in µs (clock ticks of 10 ms). */
const runnerCpu = (): number => {
  const f = readFileSync(`/proc/${svc.runnerPid()}/stat`, 'utf8').split(') ')[1]!.split(' ')
  return (Number(f[11]) + Number(f[12])) * 10_000
}

async function run (stream: boolean): Promise<string> {
  let tokens = 0
  const c0 = process.cpuUsage()
  const r0 = runnerCpu()
  for (let i = 0; i < REQUESTS; i++) {
    const r = await request(`${base}/api/generate`, { method: 'POST', body: JSON.stringify({ model: 'm', prompt: 'Once upon a time', stream, options: { seed: i, num_predict: TOKENS } }) })
    const text = await r.body.text()
    tokens += (JSON.parse(text.trimEnd().split('\n').pop()!) as { eval_count: number }).eval_count
  }
  const c1 = process.cpuUsage(c0)
  return `| ${stream} | ${((c1.user + c1.system) / tokens).toFixed(1)} | ${((runnerCpu() - r0) / tokens).toFixed(0)} |`
}

console.log(`stream_batch ${BATCH}, ${REQUESTS} requests x ${TOKENS} tokens, ${MODEL.split('/').pop()}`)
console.log('| stream | API process + client, µs CPU per token | runner process, µs CPU per token |')
console.log('|---|---|---|')
await run(false)
for (const stream of [false, true, false, true]) console.log(await run(stream))
await svc.close()
await rm(dir, { recursive: true, force: true })
