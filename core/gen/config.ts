// The [generation] table: the built-in Ollama-compatible endpoint. Static
// configuration (read at start-up only). Every key, its default and its unit is
// documented on GenerationConf; checkGeneration is the only place that applies
// those defaults. Relative paths resolve against the config file's folder.

import { homedir } from 'node:os'
import { join } from 'node:path'
import { existsSync } from 'node:fs'
import { type Checker, join as joinPath, parseDuration, resolvePath } from '../config/check.js'
import { parseModelName } from './names.js'

export interface GenerationConf {
  /** Run the generation service. Optional / Default: true. */
  readonly enabled: boolean
  /** Unix socket the API listens on; the data plane's upstream for `kind = "generate"`. Default: "run/gen.sock". */
  readonly socket: string
  /** Extra TCP listener "host:port" for Ollama clients that cannot use the balancer. Default: "" (none). */
  readonly listen: string
  /** Worker threads in the runner's piscina pool; a model lives in exactly one of them. Default: 1. */
  readonly workers: number
  /** Threads per llama context. On small CPUs 1 is much faster than more for small models. Default: 1. */
  readonly threads: number
  /** Sequences per context: requests for one model decoded together in one batch. Default: 4. */
  readonly parallel: number
  /** Contexts per loaded model (they share the weights and decode concurrently). Capacity = parallel × contexts. Default: 2. */
  readonly contexts: number
  /** Requests allowed to wait for a free sequence; beyond it 503 (Ollama's OLLAMA_MAX_QUEUE). Default: 512. */
  readonly maxQueue: number
  /** Whole-request limit, queueing included, in ms; 0 = none. Default: "5m". */
  readonly requestTimeoutMs: number
  /**
   * After a time-out, how long the runner may take to end the cancelled job before it is killed and
   * restarted (a native call that no abort reaches), in ms. Default: "5s".
   */
  readonly cancelGraceMs: number
  /** Bytes of prompt text (prompt + system, or every message's content) a request may send; more is a 413; 0 = only the body limit. Default: "1M". */
  readonly maxPromptBytes: number
  /** Prompt tokens evaluated at most; a longer input keeps its end (or 400 with "truncate": false); 0 = what the context leaves for a reply. Default: 0. */
  readonly maxPromptTokens: number
  /** Largest options.num_predict a request may ask for (more is a 400), and the cap of an unset one; 0 = the context is the only cap. Default: 0. */
  readonly maxNumPredict: number
  /** How long an idle model stays loaded, in ms; -1 = forever ("-1"), 0 = unload when idle. Default: "5m". */
  readonly keepAliveMs: number
  /** Context window per sequence, in tokens, unless a request sets options.num_ctx; capped at the model's. Default: 2048. */
  readonly numCtx: number
  /** Models kept loaded at once; an idle least-recently-used one is unloaded to make room. Default: 3. */
  readonly maxLoaded: number
  /** Folder of *.gguf files served as "<file name>:latest". Default: "" (none). */
  readonly modelsDir: string
  /** An Ollama model store (folder with manifests/ and blobs/). "" = $OLLAMA_MODELS, else ~/.ollama/models if present; "off" = none. */
  readonly ollamaModels: string
  /** Serve the project's own deterministic tiny model as "lb-tiny:latest" (written beside the socket). Default: true. */
  readonly builtinModel: boolean
  /** Streamed pieces are sent at most this often (each still its own NDJSON line), in ms; 0 = every piece at once. Default: "50ms". */
  readonly streamBatchMs: number
  /** First delay before restarting a dead runner process, in ms; doubles per crash. Default: "100ms". */
  readonly restartDelayMs: number
  /** Upper bound of that delay, in ms. Default: "10s". */
  readonly restartDelayMaxMs: number
  /** [generation.models]: "name:tag" = "path/to/file.gguf" (absolute after checking). */
  readonly models: Readonly<Record<string, string>>
}

const KEYS = [
  'enabled', 'socket', 'listen', 'workers', 'threads', 'parallel', 'contexts', 'max_queue', 'request_timeout',
  'keep_alive', 'num_ctx', 'max_loaded', 'models_dir', 'ollama_models', 'builtin_model', 'restart_delay',
  'restart_delay_max', 'stream_batch', 'cancel_grace', 'max_prompt_bytes', 'max_prompt_tokens', 'max_num_predict', 'models',
] as const

const LISTEN = /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/

/** Parses "5m", "-1", "forever" or "0" into ms (-1 = forever); NaN when malformed. */
export function parseKeepAlive (s: string): number {
  if (s === '-1' || s === 'forever') return -1
  if (s === '0') return 0
  return parseDuration(s)
}

export function checkGeneration (c: Checker, raw: unknown, path: string, baseDir: string): GenerationConf {
  const t = c.table(raw, path, KEYS)
  const abs = (p: string): string => (p === '' ? p : resolvePath(baseDir, p))

  const listen = c.string(t, 'listen', path, '')
  if (listen !== '' && (!LISTEN.test(listen) || Number(LISTEN.exec(listen)![2]) > 65535)) {
    c.problem(joinPath(path, 'listen'), 'an address like "127.0.0.1:11434" (or "" for none)', listen)
  }
  const socket = c.string(t, 'socket', path, 'run/gen.sock')
  if (socket === '') c.problem(joinPath(path, 'socket'), 'a unix socket path', socket)

  let keepAliveMs = 300_000
  if (t.keep_alive !== undefined) {
    keepAliveMs = typeof t.keep_alive === 'string' ? parseKeepAlive(t.keep_alive) : NaN
    if (Number.isNaN(keepAliveMs)) {
      c.problem(joinPath(path, 'keep_alive'), 'a duration like "5m", "0" or "-1" (forever)', t.keep_alive)
      keepAliveMs = 300_000
    }
  }
  let requestTimeoutMs = 300_000
  if (t.request_timeout === '0') requestTimeoutMs = 0
  else requestTimeoutMs = c.duration(t, 'request_timeout', path, 300_000, 1)

  let ollamaModels = c.string(t, 'ollama_models', path, '')
  if (ollamaModels === '') {
    const env = process.env.OLLAMA_MODELS ?? ''
    const home = join(homedir(), '.ollama', 'models')
    ollamaModels = env !== '' ? env : existsSync(join(home, 'manifests')) ? home : ''
  } else if (ollamaModels === 'off') {
    ollamaModels = ''
  } else {
    ollamaModels = abs(ollamaModels)
  }

  const models: Record<string, string> = {}
  const mpath = joinPath(path, 'models')
  const mt = c.table(t.models, mpath, null)
  for (const [name, file] of Object.entries(mt)) {
    const parsed = parseModelName(name)
    if (parsed === null) c.problem(joinPath(mpath, name), 'a model name like "name" or "name:tag"', name)
    if (typeof file !== 'string' || file === '') {
      c.problem(joinPath(mpath, name), 'a path to a .gguf file', file)
      continue
    }
    if (parsed !== null) models[parsed] = abs(file)
  }

  const restartDelayMs = c.duration(t, 'restart_delay', path, 100, 1)
  const streamBatchMs = t.stream_batch === '0' ? 0 : c.duration(t, 'stream_batch', path, 50)
  return {
    enabled: c.bool(t, 'enabled', path, true),
    socket: abs(socket),
    listen,
    workers: c.int(t, 'workers', path, 1, 1, 64),
    threads: c.int(t, 'threads', path, 1, 1, 256),
    parallel: c.int(t, 'parallel', path, 4, 1, 256),
    contexts: c.int(t, 'contexts', path, 2, 1, 64),
    maxQueue: c.int(t, 'max_queue', path, 512, 0, 1_000_000),
    requestTimeoutMs,
    cancelGraceMs: c.duration(t, 'cancel_grace', path, 5_000, 1),
    maxPromptBytes: c.size(t, 'max_prompt_bytes', path, 1 << 20),
    maxPromptTokens: c.int(t, 'max_prompt_tokens', path, 0, 0, 1 << 24),
    maxNumPredict: c.int(t, 'max_num_predict', path, 0, 0, 1e9),
    keepAliveMs,
    numCtx: c.int(t, 'num_ctx', path, 2048, 16, 1 << 20),
    maxLoaded: c.int(t, 'max_loaded', path, 3, 1, 64),
    modelsDir: abs(c.string(t, 'models_dir', path, '')),
    ollamaModels,
    builtinModel: c.bool(t, 'builtin_model', path, true),
    restartDelayMs,
    restartDelayMaxMs: Math.max(restartDelayMs, c.duration(t, 'restart_delay_max', path, 10_000, 1)),
    streamBatchMs,
    models,
  }
}
