// The generation service's families on /metrics (Management.attachGen with
// core/gen/stats.ts GenStats), built in-process over a real config, shared
// memory and slot registry, and checked with promtool.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { ConfigStore } from '../../core/admin/config-api/config-store.js'
import { createMetrics } from '../../core/admin/metrics.js'
import { loadConfig } from '../../core/configure.js'
import { SlotRegistry } from '../../core/control/slots.js'
import { UsageStats } from '../../core/gen/budget/usage.js'
import { emptyRequests, type GenStats } from '../../core/gen/stats.js'
import { createLogger } from '../../core/log.js'
import { createShm } from '../../core/shm/buffer.js'
import { requireTool } from './util.js'
import { tempDir } from '../helpers.js'

test('metrics: generation service families once attached', async (t) => {
  const promtool = requireTool(t, 'promtool', 'prometheus')
  const dir = tempDir('lb-gen-metrics-')
  const file = join(dir, 'lb.toml')
  writeFileSync(file, '[entrypoints.web]\naddress = "127.0.0.1:1"\n')
  const config = loadConfig(file)
  const shm = createShm(1)
  const slots = new SlotRegistry(shm)
  slots.apply(config)
  const log = createLogger('error')
  const apply = async (): Promise<string[]> => []
  const fits = (): string[] => []
  const store = new ConfigStore(file, apply, fits, log)
  const m = createMetrics({ configPath: file, config: () => config, generation: () => 1, shm, slots, log, apply, fits, startedAt: Date.now(), store, cluster: () => null })
  assert.doesNotMatch(await m.registry.metrics(), /lb_gen_/, 'no generation families before attachGen')
  const usage = new UsageStats(['team-a', 'other'])
  usage.admitted('team-a')
  usage.used('team-a', 5, 20)
  usage.rejected('other', 'unauthorized')
  usage.rejected('team-a', 'tpm')
  const stats: GenStats = { requests: emptyRequests(), tokens: 120, promptTokens: 30, queueDepth: 2, inFlight: 1, runnerRestarts: 0, socketRequests: 0, relayAdmissions: { control_plane: 3, worker: 7 }, consumers: usage.byLabel, models: new Map(), view: () => ({ servers: [], queueDepth: 0, budgets: [] }) }
  stats.requests.generate.ok = 5
  stats.requests.chat.busy = 1
  m.attachGen(() => stats)
  const text = await m.registry.metrics()
  assert.match(text, /^lb_gen_requests_total\{endpoint="generate",outcome="ok"\} 5$/m)
  assert.match(text, /^lb_gen_requests_total\{endpoint="chat",outcome="busy"\} 1$/m)
  assert.match(text, /^lb_gen_tokens_total 120$/m)
  assert.match(text, /^lb_gen_prompt_tokens_total 30$/m)
  assert.match(text, /^lb_gen_queue_depth 2$/m)
  assert.match(text, /^lb_gen_in_flight 1$/m)
  assert.match(text, /^lb_gen_relay_admissions_total\{by="worker"\} 7$/m)
  assert.match(text, /^lb_gen_consumer_requests_total\{consumer="team-a"\} 1$/m)
  assert.match(text, /^lb_gen_consumer_rejections_total\{consumer="other",reason="unauthorized"\} 1$/m)
  assert.match(text, /^lb_gen_consumer_rejections_total\{consumer="team-a",reason="tpm"\} 1$/m)
  assert.match(text, /^gen_ai_client_token_usage_bucket\{consumer="team-a",gen_ai_token_type="output",le="16"\} 0$/m)
  assert.match(text, /^gen_ai_client_token_usage_bucket\{consumer="team-a",gen_ai_token_type="output",le="64"\} 1$/m)
  assert.match(text, /^gen_ai_client_token_usage_sum\{consumer="team-a",gen_ai_token_type="input"\} 5$/m)
  assert.match(text, /^gen_ai_client_token_usage_count\{consumer="other",gen_ai_token_type="input"\} 0$/m)
  stats.tokens = 150
  assert.match(await m.registry.metrics(), /^lb_gen_tokens_total 150$/m, 'read at scrape time')
  if (promtool !== null) assert.equal(execFileSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8' }).trim(), '')
})
