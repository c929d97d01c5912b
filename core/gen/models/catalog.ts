// Which GGUF file a model name means. Sources, first match wins:
//   1. [generation.models] in the config ("name:tag" = file),
//   2. models_dir: every *.gguf file, named after the file ("stories260K.gguf" -> "stories260k:latest"),
//   3. an Ollama store (manifests/<host>/<namespace>/<model>/<tag> -> blobs/sha256-<hex>), so Ollama
//      users serve the models they already pulled, with the store's system prompt and default options,
//   4. the built-in tiny model ("lb-tiny:latest").
// Scans are cheap (a few readdir/stat calls): /api/tags rescans every time, and a
// lookup that misses rescans at most every MISS_RESCAN_MS, so a file dropped
// into the folder is served without a restart.

import { createHash } from 'node:crypto'
import { readdir, readFile, stat } from 'node:fs/promises'
import { basename, join } from 'node:path'
import type { Logger } from '../../log.js'
import type { GenerationConf } from '../config.js'
import { readGgufInfo, type GgufInfo } from './gguf.js'
import { parseModelName, storeName } from './names.js'
import { TINY_MODEL_NAME } from './tiny-model.js'

const MISS_RESCAN_MS = 250
const SMALL_LAYER = 1 << 20

export interface ModelEntry {
  /** Canonical "name:tag". */
  name: string
  path: string
  /** Hex sha256: of the manifest for store models, of path+size+mtime otherwise (an identity, not the content). */
  digest: string
  /** Bytes (all layers for store models). */
  size: number
  modifiedAt: Date
  /** Store models: the manifest's system prompt, template text and default options. */
  system: string | null
  template: string | null
  params: Readonly<Record<string, unknown>> | null
}

const identity = (path: string, size: number, mtimeMs: number): string =>
  createHash('sha256').update(`${path}\0${size}\0${mtimeMs}`).digest('hex')

async function fileEntry (name: string, path: string): Promise<ModelEntry | null> {
  const st = await stat(path).catch(() => null)
  if (st === null || !st.isFile()) return null
  return {
    name, path, digest: identity(path, st.size, st.mtimeMs), size: st.size, modifiedAt: st.mtime,
    system: null, template: null, params: null,
  }
}

interface Layer { mediaType?: unknown, digest?: unknown, size?: unknown }

async function storeEntry (store: string, name: string, manifestPath: string): Promise<ModelEntry | null> {
  const raw = await readFile(manifestPath).catch(() => null)
  if (raw === null) return null
  let manifest: { layers?: Layer[] }
  try { manifest = JSON.parse(raw.toString('utf8')) as { layers?: Layer[] } } catch { return null }
  if (!Array.isArray(manifest.layers)) return null
  const blob = (l: Layer): string | null =>
    typeof l.digest === 'string' && /^sha256:[0-9a-f]{64}$/.test(l.digest) ? join(store, 'blobs', l.digest.replace(':', '-')) : null
  const small = async (type: string): Promise<string | null> => {
    const l = manifest.layers!.find((x) => x.mediaType === type)
    const p = l === undefined ? null : blob(l)
    if (p === null || (typeof l!.size === 'number' && l!.size > SMALL_LAYER)) return null
    return await readFile(p, 'utf8').catch(() => null)
  }
  const model = manifest.layers.find((l) => l.mediaType === 'application/vnd.ollama.image.model')
  const path = model === undefined ? null : blob(model)
  if (path === null) return null
  const st = await stat(path).catch(() => null)
  const mst = await stat(manifestPath).catch(() => null)
  if (st === null || mst === null) return null
  let params: Record<string, unknown> | null = null
  const p = await small('application/vnd.ollama.image.params')
  if (p !== null) {
    try { params = JSON.parse(p) as Record<string, unknown> } catch { params = null }
  }
  let size = 0
  for (const l of manifest.layers) size += typeof l.size === 'number' ? l.size : 0
  return {
    name, path, digest: createHash('sha256').update(raw).digest('hex'), size, modifiedAt: mst.mtime,
    system: await small('application/vnd.ollama.image.system'),
    template: await small('application/vnd.ollama.image.template'),
    params,
  }
}

const dirs = async (p: string): Promise<string[]> =>
  (await readdir(p, { withFileTypes: true }).catch(() => [])).filter((d) => d.isDirectory()).map((d) => d.name)

export class ModelCatalog {
  private readonly conf: GenerationConf
  private readonly builtinPath: string | null
  private readonly log: Logger
  private entries = new Map<string, ModelEntry>()
  private scanning: Promise<void> | null = null
  private scannedAt = 0
  private readonly infos = new Map<string, { key: string, info: Promise<GgufInfo> }>()
  private readonly warned = new Set<string>()

  constructor (conf: GenerationConf, builtinPath: string | null, log: Logger) {
    this.conf = conf
    this.builtinPath = builtinPath
    this.log = log
  }

  /** The entry for a canonical name, or null when no source has it. */
  async lookup (name: string): Promise<ModelEntry | null> {
    const hit = this.entries.get(name)
    if (hit !== undefined) return hit
    if (Date.now() - this.scannedAt >= MISS_RESCAN_MS) await this.scan()
    return this.entries.get(name) ?? null
  }

  /**
   * The entry for a canonical name as the last scan found it, without waiting for a scan: for a name a remote
   * server serves, whose request must not wait on the folder (a rescan took its first token 1-3 ms). A miss
   * starts a rescan when the last one is stale, so a file dropped in still takes over within a request or two.
   */
  peek (name: string): ModelEntry | null {
    const hit = this.entries.get(name)
    if (hit !== undefined) return hit
    if (Date.now() - this.scannedAt >= MISS_RESCAN_MS) void this.scan().catch(() => undefined)
    return null
  }

  /** The names found by the last scan, without scanning (for views that cannot wait: the dashboard, `show models`). */
  known (): string[] {
    return [...this.entries.keys()]
  }

  async list (): Promise<ModelEntry[]> {
    await this.scan()
    return [...this.entries.values()]
  }

  /** GGUF header of a model, cached per file version. */
  async info (e: ModelEntry): Promise<GgufInfo> {
    const key = `${e.size}:${e.modifiedAt.getTime()}`
    const c = this.infos.get(e.path)
    if (c !== undefined && c.key === key) return await c.info
    const info = readGgufInfo(e.path)
    this.infos.set(e.path, { key, info })
    info.catch(() => this.infos.delete(e.path))
    return await info
  }

  private async scan (): Promise<void> {
    if (this.scanning === null) {
      this.scanning = this.doScan().finally(() => {
        this.scannedAt = Date.now()
        this.scanning = null
      })
    }
    await this.scanning
  }

  private warnOnce (key: string, msg: string, fields: Record<string, unknown>): void {
    if (this.warned.has(key)) return
    this.warned.add(key)
    this.log.warn(msg, fields)
  }

  private async doScan (): Promise<void> {
    const found = new Map<string, ModelEntry>()
    const add = (e: ModelEntry | null): void => { if (e !== null && !found.has(e.name)) found.set(e.name, e) }
    for (const [name, path] of Object.entries(this.conf.models)) {
      const e = await fileEntry(name, path)
      if (e === null) this.warnOnce(`config:${path}`, 'configured model file not found', { model: name, path })
      add(e)
    }
    if (this.conf.modelsDir !== '') {
      const files = await readdir(this.conf.modelsDir).catch(() => null)
      if (files === null) this.warnOnce(`dir:${this.conf.modelsDir}`, 'models_dir cannot be read', { path: this.conf.modelsDir })
      for (const f of (files ?? []).sort()) {
        if (!f.toLowerCase().endsWith('.gguf')) continue
        const name = parseModelName(basename(f, f.slice(-5)))
        if (name !== null) add(await fileEntry(name, join(this.conf.modelsDir, f)))
      }
    }
    const store = this.conf.ollamaModels
    if (store !== '') {
      const root = join(store, 'manifests')
      for (const host of await dirs(root)) {
        for (const ns of await dirs(join(root, host))) {
          for (const model of await dirs(join(root, host, ns))) {
            const tags = await readdir(join(root, host, ns, model)).catch(() => [] as string[])
            for (const tag of tags.sort()) {
              const name = storeName(host, ns, model, tag)
              if (name !== null && !found.has(name)) add(await storeEntry(store, name, join(root, host, ns, model, tag)))
            }
          }
        }
      }
    }
    if (this.builtinPath !== null) add(await fileEntry(TINY_MODEL_NAME, this.builtinPath))
    this.entries = found
  }
}
