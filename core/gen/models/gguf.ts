// Reads the header of a GGUF file (version 2 or 3): its metadata and the
// shapes of its tensors, never the weights. The API layer needs this for
// /api/tags and /api/show (family, parameter count, quantization, context
// length, chat template) and must not load node-llama-cpp in the control plane
// to get it. Layout (little endian):
//   "GGUF" u32 version, u64 tensor_count, u64 kv_count,
//   kv_count × { string key, u32 type, value },
//   tensor_count × { string name, u32 n_dims, u64 dims[n_dims], u32 ggml_type, u64 offset }
// where a string is u64 length + UTF-8 bytes and an array is u32 type, u64 count, values.

import { open, type FileHandle } from 'node:fs/promises'

/** GGUF value types, as numbered in the file. */
export const GGUF_TYPE = {
  U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STRING: 8, ARRAY: 9, U64: 10, I64: 11, F64: 12,
} as const

export const GGUF_MAGIC = 0x46554747 // "GGUF" read as a little-endian u32

/** A metadata value; arrays longer than SMALL_ARRAY are summarised as null (as Ollama's /api/show does). */
export type GgufValue = number | bigint | string | boolean | GgufValue[] | null

const SMALL_ARRAY = 64
const CHUNK = 1 << 20

export interface GgufInfo {
  version: number
  metadata: Map<string, GgufValue>
  tensorCount: number
  /** Sum of the element counts of all tensors. */
  parameterCount: number
  /** The ggml type holding the most elements (the quantization when general.file_type is absent). */
  mainTensorType: number
}

/** A forward-only reader over a file handle with a 1 MiB window. */
class Cursor {
  private buf = Buffer.alloc(0)
  private start = 0
  pos = 0
  private readonly fh: FileHandle
  private readonly size: number
  constructor (fh: FileHandle, size: number) {
    this.fh = fh
    this.size = size
  }

  async need (n: number): Promise<void> {
    if (this.pos + n <= this.start + this.buf.length) return
    if (this.pos + n > this.size) throw new Error('truncated GGUF header')
    const len = Math.max(n, CHUNK)
    const buf = Buffer.alloc(Math.min(len, this.size - this.pos))
    await this.fh.read(buf, 0, buf.length, this.pos)
    this.buf = buf
    this.start = this.pos
  }

  private at (n: number): number {
    const o = this.pos - this.start
    this.pos += n
    return o
  }

  async u32 (): Promise<number> { await this.need(4); return this.buf.readUInt32LE(this.at(4)) }
  async u64 (): Promise<number> {
    await this.need(8)
    const v = this.buf.readBigUInt64LE(this.at(8))
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('GGUF count out of range')
    return Number(v)
  }

  async string (): Promise<string> {
    const n = await this.u64()
    await this.need(n)
    const o = this.at(n)
    return this.buf.toString('utf8', o, o + n)
  }

  async scalar (type: number): Promise<GgufValue> {
    switch (type) {
      case GGUF_TYPE.U8: await this.need(1); return this.buf.readUInt8(this.at(1))
      case GGUF_TYPE.I8: await this.need(1); return this.buf.readInt8(this.at(1))
      case GGUF_TYPE.U16: await this.need(2); return this.buf.readUInt16LE(this.at(2))
      case GGUF_TYPE.I16: await this.need(2); return this.buf.readInt16LE(this.at(2))
      case GGUF_TYPE.U32: return await this.u32()
      case GGUF_TYPE.I32: await this.need(4); return this.buf.readInt32LE(this.at(4))
      case GGUF_TYPE.F32: await this.need(4); return this.buf.readFloatLE(this.at(4))
      case GGUF_TYPE.BOOL: await this.need(1); return this.buf.readUInt8(this.at(1)) !== 0
      case GGUF_TYPE.STRING: return await this.string()
      case GGUF_TYPE.U64: { await this.need(8); const v = this.buf.readBigUInt64LE(this.at(8)); return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v }
      case GGUF_TYPE.I64: { await this.need(8); const v = this.buf.readBigInt64LE(this.at(8)); return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= BigInt(Number.MIN_SAFE_INTEGER) ? Number(v) : v }
      case GGUF_TYPE.F64: await this.need(8); return this.buf.readDoubleLE(this.at(8))
      default: throw new Error(`unknown GGUF value type ${type}`)
    }
  }

  async value (type: number): Promise<GgufValue> {
    if (type !== GGUF_TYPE.ARRAY) return await this.scalar(type)
    const et = await this.u32()
    const n = await this.u64()
    const out: GgufValue[] | null = n <= SMALL_ARRAY ? [] : null
    for (let i = 0; i < n; i++) {
      const v = await this.value(et)
      if (out !== null) out.push(v)
    }
    return out
  }
}

export async function readGgufInfo (path: string): Promise<GgufInfo> {
  const fh = await open(path, 'r')
  try {
    const { size } = await fh.stat()
    const c = new Cursor(fh, size)
    if (await c.u32() !== GGUF_MAGIC) throw new Error('not a GGUF file (bad magic)')
    const version = await c.u32()
    if (version < 2 || version > 3) throw new Error(`unsupported GGUF version ${version}`)
    const tensorCount = await c.u64()
    const kvCount = await c.u64()
    const metadata = new Map<string, GgufValue>()
    for (let i = 0; i < kvCount; i++) {
      const key = await c.string()
      metadata.set(key, await c.value(await c.u32()))
    }
    let parameterCount = 0
    const perType = new Map<number, number>()
    for (let i = 0; i < tensorCount; i++) {
      await c.string()
      const dims = await c.u32()
      let n = 1
      for (let d = 0; d < dims; d++) n *= await c.u64()
      const type = await c.u32()
      await c.u64()
      parameterCount += n
      perType.set(type, (perType.get(type) ?? 0) + n)
    }
    let mainTensorType = -1
    for (const [type, n] of perType) if (mainTensorType < 0 || n > perType.get(mainTensorType)!) mainTensorType = type
    return { version, metadata, tensorCount, parameterCount, mainTensorType }
  } finally {
    await fh.close()
  }
}

// llama.cpp's llama_ftype numbering (general.file_type) -> Ollama's quantization_level.
const FILE_TYPES: Record<number, string> = {
  0: 'F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 7: 'Q8_0', 8: 'Q5_0', 9: 'Q5_1', 10: 'Q2_K', 11: 'Q3_K_S', 12: 'Q3_K_M',
  13: 'Q3_K_L', 14: 'Q4_K_S', 15: 'Q4_K_M', 16: 'Q5_K_S', 17: 'Q5_K_M', 18: 'Q6_K', 19: 'IQ2_XXS', 20: 'IQ2_XS',
  21: 'Q2_K_S', 22: 'IQ3_XS', 23: 'IQ3_XXS', 24: 'IQ1_S', 25: 'IQ4_NL', 26: 'IQ3_S', 27: 'IQ3_M', 28: 'IQ2_S',
  29: 'IQ2_M', 30: 'IQ4_XS', 31: 'IQ1_M', 32: 'BF16', 36: 'TQ1_0', 37: 'TQ2_0',
}

// ggml tensor type numbering -> name, for files without general.file_type.
const TENSOR_TYPES: Record<number, string> = {
  0: 'F32', 1: 'F16', 2: 'Q4_0', 3: 'Q4_1', 6: 'Q5_0', 7: 'Q5_1', 8: 'Q8_0', 9: 'Q8_1', 10: 'Q2_K', 11: 'Q3_K',
  12: 'Q4_K', 13: 'Q5_K', 14: 'Q6_K', 15: 'Q8_K', 30: 'BF16',
}

export function quantizationLevel (info: GgufInfo): string {
  const ft = info.metadata.get('general.file_type')
  if (typeof ft === 'number') return FILE_TYPES[ft] ?? `type ${ft}`
  return TENSOR_TYPES[info.mainTensorType] ?? 'unknown'
}

/** "7.6B", "135M", "260K", as Ollama's format.HumanNumber. */
export function humanCount (n: number): string {
  const unit = (v: number, s: string, digits: number): string =>
    `${Number.isInteger(v) ? v.toFixed(0) : v.toFixed(digits)}${s}`
  if (n >= 1e9) return unit(n / 1e9, 'B', 1)
  if (n >= 1e6) return unit(n / 1e6, 'M', 1)
  if (n >= 1e3) return `${Math.round(n / 1e3)}K`
  return String(n)
}

export function architecture (info: GgufInfo): string {
  const a = info.metadata.get('general.architecture')
  return typeof a === 'string' ? a : 'unknown'
}

/** The trained context length, in tokens (0 when the file does not say). */
export function contextLength (info: GgufInfo): number {
  const v = info.metadata.get(`${architecture(info)}.context_length`)
  return typeof v === 'number' ? v : 0
}
