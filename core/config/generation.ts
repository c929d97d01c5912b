// The shape of the [generation] table, in the config layer so that Config can
// name it. core/gen/config.ts checks the table and applies these defaults; the
// loader is handed that checker (ConfigSections) and imports nothing of core/gen.

/** The wire a remote model server speaks: Ollama's API, OpenAI's (llama.cpp server, vLLM, a gateway), or another lb (Ollama's API). */
export type RemoteKind = 'ollama' | 'openai' | 'lb'
export const REMOTE_KINDS: readonly RemoteKind[] = ['ollama', 'openai', 'lb']

/**
 * Where a remote model server's reply is relayed: "worker", in the data-plane worker that received the request
 * (the control plane only admits it, core/gen/edge/); "service", through the generation service's socket and
 * main thread as every other request of the service.
 */
export type GenRelay = 'worker' | 'service'
export const RELAYS: readonly GenRelay[] = ['worker', 'service']

/** One [[generation.servers]] entry: a model server requests may be sent to. */
export interface RemoteServerConf {
  /** Unique; names the server in logs and errors. Required. */
  readonly name: string
  /** Required: "ollama", "openai" or "lb". */
  readonly kind: RemoteKind
  /** Base URL, http or https, without a trailing slash (an openai-kind URL's trailing "/v1" is dropped). Required. */
  readonly url: string
  /** Sent as "Authorization: Bearer ..." to the server ("${NAME}" takes it from the environment); never logged. Default: "" (none). */
  readonly apiKey: string
  /** How often the server's models (/api/tags or /v1/models) and loaded models (/api/ps) are read again, in ms. Default: "10s". */
  readonly refreshMs: number
}

/** Limits of one consumer; 0 = no limit. Windows are fixed: the UTC minute and the UTC day (core/gen/budget/ledger.ts). */
export interface GenLimits {
  /** Requests admitted per minute. Default: 0. */
  readonly rpm: number
  /** Tokens (prompt + completion) per minute. Default: 0. */
  readonly tpm: number
  /** Tokens (prompt + completion) per UTC day. Default: 0. */
  readonly tpd: number
  /** Requests running or queued at once. Default: 0. */
  readonly maxInFlight: number
}

/** [[generation.keys]]: one consumer's API key(s) and budget. */
export interface GenKeyConf extends GenLimits {
  /** The consumer's name, the only thing logs, metrics and the dashboard show ([A-Za-z0-9._-], not "other"). */
  readonly consumer: string
  /** "sha256:<64 hex>" of each key (`lb hash-token`): several = the same consumer and budget (rotation). */
  readonly hashes: readonly string[]
  /** Model patterns ("name" = any tag, "name:tag", "*" anywhere) this key may use and list; empty = all. */
  readonly models: readonly string[]
}

/**
 * [generation.auth]: who may call the generation service. With keys configured and `required`, a request
 * without a valid key is refused (401); without `required`, it is a consumer named after the user lb's
 * basicAuth/jwt/oidc authenticated (header x-lb-user) or else its source address, with these limits each.
 */
export interface GenAuthConf extends GenLimits {
  /** A request must carry one of the keys (only meaningful when keys exist). Default: true. */
  readonly required: boolean
}

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
  /** [generation.auth]: key requirement and the limits of consumers without a key. */
  readonly auth: GenAuthConf
  /** [[generation.keys]]: API keys, each a consumer with its budget. Default: none (no key asked). */
  readonly keys: readonly GenKeyConf[]
  /** [generation.models]: "name:tag" = "path/to/file.gguf" (absolute after checking). */
  readonly models: Readonly<Record<string, string>>
  /** [[generation.servers]]: remote model servers, in the order given. Default: none. */
  readonly servers: readonly RemoteServerConf[]
  /** [generation.aliases]: a requested canonical name -> the canonical name served ("gpt-4o-mini" -> "qwen2.5:7b:latest"). */
  readonly aliases: Readonly<Record<string, string>>
  /** [generation.fallbacks]: a canonical name -> names tried in order when no server could start it (before the first byte). */
  readonly fallbacks: Readonly<Record<string, readonly string[]>>
  /** Where remote models' replies are relayed (GenRelay): "worker" or "service". Default: "worker". */
  readonly relay: GenRelay
}
