// The [generation] table: the built-in Ollama-compatible endpoint. Static
// configuration (read at start-up only). Every key, its default and its unit is
// documented on GenerationConf; checkGeneration is the only place that applies
// those defaults. Relative paths resolve against the config file's folder.

import { homedir } from 'node:os'
import { join } from 'node:path'
import { existsSync } from 'node:fs'
import { type Checker, join as joinPath, parseDuration, resolvePath } from '../config/check.js'
import { type GenerationConf, RELAYS } from '../config/generation.js'
import { checkAuth, checkKeys } from './budget/conf.js'
import { parseModelName } from './models/names.js'
import { checkRemote } from './remote/config.js'

// the shape lives in the config layer (core/config/generation.ts), which the loader may import
export type { GenerationConf } from '../config/generation.js'

const KEYS = [
  'enabled', 'socket', 'listen', 'workers', 'threads', 'parallel', 'contexts', 'max_queue', 'request_timeout',
  'keep_alive', 'num_ctx', 'max_loaded', 'models_dir', 'ollama_models', 'builtin_model', 'restart_delay',
  'restart_delay_max', 'stream_batch', 'cancel_grace', 'max_prompt_bytes', 'max_prompt_tokens', 'max_num_predict', 'models',
  'servers', 'aliases', 'fallbacks', 'relay',
  'auth', 'keys',
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
  const remote = checkRemote(c, t, path)
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
    auth: checkAuth(c, t.auth, joinPath(path, 'auth')),
    keys: checkKeys(c, t.keys, joinPath(path, 'keys')),
    models,
    servers: remote.servers,
    aliases: remote.aliases,
    fallbacks: remote.fallbacks,
    relay: c.oneOf(t, 'relay', path, RELAYS, 'worker'),
  }
}
