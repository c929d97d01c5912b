// What a pause costs the code that runs after it, on this machine: the
// median µs of one piece of the gateway's first-token path (JSON.parse and the
// OpenAI parser of the one-token request bench/gen/relay.ts --ttft sends) run
// once after the thread slept 0 (a microtask), 1, 5 and 20 ms. A paced model
// server leaves lb's worker asleep 20 ms between the request and the first
// token, so the gateway's work around the first token runs at the "20 ms"
// figure, not at the back-to-back one its throughput sees.
//
//   npm run build && node dist/bench/gen/cold.js [--samples 200]
import { parseChatCompletion } from '../../core/gen/openai/request.js'

const args = process.argv.slice(2)
const i = args.indexOf('--samples')
const SAMPLES = i >= 0 ? Number(args[i + 1]) : 200
const body = JSON.stringify({ model: 'fake', stream: true, max_tokens: 1, messages: [{ role: 'user', content: 'go' }] })

const once = (): number => {
  const s = process.hrtime.bigint()
  parseChatCompletion(JSON.parse(body))
  return Number(process.hrtime.bigint() - s) / 1000
}
const pause = (ms: number): Promise<void> => ms === 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms))
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!

for (let k = 0; k < 1000; k++) once() // optimised, as in a worker that has served a while
process.stdout.write('| pause before, ms | µs, median |\n|---:|---:|\n')
for (const ms of [0, 1, 5, 20]) {
  const got: number[] = []
  for (let k = 0; k < SAMPLES; k++) {
    await pause(ms)
    got.push(once())
  }
  process.stdout.write(`| ${ms} | ${median(got).toFixed(1)} |\n`)
}
