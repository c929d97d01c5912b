// Writes an untrained llama-architecture GGUF v3 file of any size, from its
// dimensions alone: the built-in tiny model (tiny-model.ts) and the larger
// benchmark models (bench/gen/make-model.ts) are the same design at different
// sizes. The vocabulary is byte-level (<unk>, <s>, </s> and the 256 byte
// tokens <0x00>..<0xFF>), so any input tokenizes. The weights come from a
// fixed-seed PRNG, so the same dimensions always give the same bytes.
//
// To make the output look like text rather than noise, every token embedding
// carries a constant 1 in dimension 0 and the other weights are small: after
// the final RMS norm, dimension 0 dominates, and column 0 of the output matrix
// holds the log frequency of each byte in English text. The model is therefore
// roughly a unigram model of letters and spaces; `eosFreq` sets how often it
// ends its text (</s>). Matrix weights scale with 1/sqrt(embedding), so the
// blocks stay small perturbations of the embedding whatever the size.

import { readFile } from 'node:fs/promises'
import { writeFileAtomic } from '../../atomic-file.js'
import { GGUF_MAGIC, GGUF_TYPE } from './gguf.js'

export interface LlamaDims {
  /** general.name */
  name: string
  /** Embedding width; a multiple of `heads` (and of 32 for f16, for alignment). */
  embd: number
  /** Feed-forward width. */
  ff: number
  heads: number
  blocks: number
  /** Trained context length, tokens (llama.context_length). */
  ctx: number
  /** Storage of the matrices; norm vectors are always f32, as llama.cpp expects. */
  type: 'f32' | 'f16'
  /** Frequency of </s> on the same per-mille scale as the bytes' (FREQ below): 8 ends text after a few hundred tokens. */
  eosFreq: number
  /** Bytes written more or less often than FREQ says (same scale): test fixtures that favour a character. */
  freq?: Readonly<Record<string, number>>
}

const N_VOCAB = 259
const ALIGN = 32
/** ggml tensor types, as numbered in the file. */
const GGML = { f32: 0, f16: 1 } as const
/** general.file_type: ALL_F32 = 0, MOSTLY_F16 = 1. */
const FILE_TYPE = { f32: 0, f16: 1 } as const
const SEED = 0x6c62 // "lb"
/** Uniform range of the embedding's dimensions other than 0 (which is 1). */
const EMBD_NOISE = 0.5

/** mulberry32: a tiny deterministic PRNG; returns floats in [-1, 1). */
function prng (seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return (((t ^ (t >>> 14)) >>> 0) / 4294967296) * 2 - 1
  }
}

/** Relative frequency (per mille, rough English) of the bytes the model should write. */
const FREQ: Record<string, number> = {
  ' ': 180, e: 100, t: 75, a: 65, o: 62, i: 57, n: 57, s: 52, h: 50, r: 49, d: 34, l: 33, u: 23, c: 22, m: 20,
  w: 19, f: 18, g: 16, y: 16, p: 15, b: 12, ',': 10, '.': 9, v: 8, k: 6, '\n': 3, j: 1, x: 1, q: 1, z: 1,
}
/** Frequency of every other byte. */
const RARE = 0.001

function tokenText (id: number): string {
  if (id === 0) return '<unk>'
  if (id === 1) return '<s>'
  if (id === 2) return '</s>'
  return `<0x${(id - 3).toString(16).toUpperCase().padStart(2, '0')}>`
}

interface Tensor { name: string, dims: number[], data: Float32Array }

function tensors (d: LlamaDims): Tensor[] {
  const rnd = prng(SEED)
  const fill = (n: number, scale: number): Float32Array => {
    const a = new Float32Array(n)
    for (let i = 0; i < n; i++) a[i] = rnd() * scale
    return a
  }
  const ones = (n: number): Float32Array => new Float32Array(n).fill(1)
  const e = d.embd
  // Matrix scales: 0.1 and 0.05 at embedding 16, shrinking as 1/sqrt(e) so a projection's output stays as small.
  const big = 0.4 / Math.sqrt(e)
  const small = 0.2 / Math.sqrt(e)
  // ggml dims are [columns, rows]: a weight with dims [in, out] maps in -> out.
  const embd = fill(e * N_VOCAB, EMBD_NOISE)
  for (let t = 0; t < N_VOCAB; t++) embd[t * e] = 1
  const out = fill(e * N_VOCAB, 1.2 / Math.sqrt(e))
  // After the norm, dimension 0 is 1 / rms of the embedding (2.7 at width 16), so logit ≈ dim0 * out[t][0]:
  // aim at ln(freq). Rounded to 0.1: it is a rough aim, and this keeps the tiny model's bytes as they were.
  const dim0 = Math.round(10 / Math.sqrt((1 + (e - 1) * EMBD_NOISE ** 2 / 3) / e)) / 10
  for (let t = 0; t < N_VOCAB; t++) {
    const ch = t >= 3 ? String.fromCharCode(t - 3) : ''
    const f = t === 2 ? d.eosFreq : d.freq?.[ch] ?? FREQ[ch] ?? RARE
    out[t * e] = Math.log(f) / dim0
  }
  const ts: Tensor[] = [
    { name: 'token_embd.weight', dims: [e, N_VOCAB], data: embd },
    { name: 'output_norm.weight', dims: [e], data: ones(e) },
    { name: 'output.weight', dims: [e, N_VOCAB], data: out },
  ]
  for (let b = 0; b < d.blocks; b++) {
    ts.push(
      { name: `blk.${b}.attn_norm.weight`, dims: [e], data: ones(e) },
      { name: `blk.${b}.attn_q.weight`, dims: [e, e], data: fill(e * e, big) },
      { name: `blk.${b}.attn_k.weight`, dims: [e, e], data: fill(e * e, big) },
      { name: `blk.${b}.attn_v.weight`, dims: [e, e], data: fill(e * e, big) },
      { name: `blk.${b}.attn_output.weight`, dims: [e, e], data: fill(e * e, small) },
      { name: `blk.${b}.ffn_norm.weight`, dims: [e], data: ones(e) },
      { name: `blk.${b}.ffn_gate.weight`, dims: [e, d.ff], data: fill(e * d.ff, big) },
      { name: `blk.${b}.ffn_up.weight`, dims: [e, d.ff], data: fill(e * d.ff, big) },
      { name: `blk.${b}.ffn_down.weight`, dims: [d.ff, e], data: fill(d.ff * e, small) }
    )
  }
  return ts
}

/** IEEE 754 half precision of each float (normals round to nearest even; the weights here never overflow). */
function toF16 (src: Float32Array): Buffer {
  const f = new Float32Array(1)
  const u = new Uint32Array(f.buffer)
  const out = Buffer.alloc(src.length * 2)
  for (let i = 0; i < src.length; i++) {
    f[0] = src[i]!
    const x = u[0]!
    const sign = (x >>> 16) & 0x8000
    const exp = ((x >>> 23) & 0xff) - 127 + 15
    const mant = x & 0x7fffff
    let h: number
    if (exp <= 0) {
      // Below the smallest normal half: a subnormal is a multiple of 2^-24 (1024 carries into the smallest normal).
      h = Math.round(Math.abs(src[i]!) * 2 ** 24)
    } else if (exp >= 31) {
      h = 0x7c00
    } else {
      h = (exp << 10) | (mant >>> 13)
      const rest = mant & 0x1fff
      if (rest > 0x1000 || (rest === 0x1000 && (h & 1) === 1)) h++
    }
    out.writeUInt16LE(sign | h, i * 2)
  }
  return out
}

/** Little-endian byte sink for the header. */
class Sink {
  readonly parts: Buffer[] = []
  length = 0
  private push (b: Buffer): void { this.parts.push(b); this.length += b.length }
  u32 (v: number): void { const b = Buffer.alloc(4); b.writeUInt32LE(v); this.push(b) }
  i32 (v: number): void { const b = Buffer.alloc(4); b.writeInt32LE(v); this.push(b) }
  u64 (v: number): void { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.push(b) }
  f32 (v: number): void { const b = Buffer.alloc(4); b.writeFloatLE(v); this.push(b) }
  bool (v: boolean): void { this.push(Buffer.from([v ? 1 : 0])) }
  str (s: string): void { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.push(b) }
  pad (): void { const n = (ALIGN - (this.length % ALIGN)) % ALIGN; if (n > 0) this.push(Buffer.alloc(n)) }
  raw (b: Buffer): void { this.push(b) }
}

type Kv = [string, 'u32' | 'f32' | 'str' | 'bool', number | string | boolean] | [string, 'strs' | 'f32s' | 'i32s', unknown[]]

/** The complete file, byte for byte the same for the same dimensions. */
export function llamaGgufBytes (d: LlamaDims): Buffer {
  const ids = Array.from({ length: N_VOCAB }, (_, i) => i)
  const kvs: Kv[] = [
    ['general.architecture', 'str', 'llama'],
    ['general.name', 'str', d.name],
    ['general.file_type', 'u32', FILE_TYPE[d.type]],
    ['llama.context_length', 'u32', d.ctx],
    ['llama.embedding_length', 'u32', d.embd],
    ['llama.block_count', 'u32', d.blocks],
    ['llama.feed_forward_length', 'u32', d.ff],
    ['llama.attention.head_count', 'u32', d.heads],
    ['llama.attention.head_count_kv', 'u32', d.heads],
    ['llama.rope.dimension_count', 'u32', d.embd / d.heads],
    ['llama.attention.layer_norm_rms_epsilon', 'f32', 1e-5],
    ['tokenizer.ggml.model', 'str', 'llama'],
    ['tokenizer.ggml.tokens', 'strs', ids.map(tokenText)],
    ['tokenizer.ggml.scores', 'f32s', ids.map(() => 0)],
    ['tokenizer.ggml.token_type', 'i32s', ids.map((i) => (i === 0 ? 2 : i < 3 ? 3 : 6))],
    ['tokenizer.ggml.bos_token_id', 'u32', 1],
    ['tokenizer.ggml.eos_token_id', 'u32', 2],
    ['tokenizer.ggml.unknown_token_id', 'u32', 0],
    ['tokenizer.ggml.add_bos_token', 'bool', true],
    ['tokenizer.ggml.add_eos_token', 'bool', false],
  ]
  const ts = tensors(d).map((t) => {
    const half = d.type === 'f16' && t.dims.length > 1
    return { ...t, type: half ? GGML.f16 : GGML.f32, bytes: half ? toF16(t.data) : Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength) }
  })
  const h = new Sink()
  h.u32(GGUF_MAGIC)
  h.u32(3)
  h.u64(ts.length)
  h.u64(kvs.length)
  for (const [key, kind, v] of kvs) {
    h.str(key)
    switch (kind) {
      case 'u32': h.u32(GGUF_TYPE.U32); h.u32(v as number); break
      case 'f32': h.u32(GGUF_TYPE.F32); h.f32(v as number); break
      case 'str': h.u32(GGUF_TYPE.STRING); h.str(v as string); break
      case 'bool': h.u32(GGUF_TYPE.BOOL); h.bool(v as boolean); break
      case 'strs': h.u32(GGUF_TYPE.ARRAY); h.u32(GGUF_TYPE.STRING); h.u64((v as string[]).length); for (const s of v as string[]) h.str(s); break
      case 'f32s': h.u32(GGUF_TYPE.ARRAY); h.u32(GGUF_TYPE.F32); h.u64((v as number[]).length); for (const x of v as number[]) h.f32(x); break
      case 'i32s': h.u32(GGUF_TYPE.ARRAY); h.u32(GGUF_TYPE.I32); h.u64((v as number[]).length); for (const x of v as number[]) h.i32(x); break
      default: { const never: never = kind; throw new Error(`kind ${String(never)}`) }
    }
  }
  let offset = 0
  for (const t of ts) {
    h.str(t.name)
    h.u32(t.dims.length)
    for (const x of t.dims) h.u64(x)
    h.u32(t.type)
    h.u64(offset)
    offset += Math.ceil(t.bytes.length / ALIGN) * ALIGN
  }
  h.pad()
  for (const t of ts) {
    h.raw(t.bytes)
    h.pad()
  }
  return Buffer.concat(h.parts, h.length)
}

/**
 * Writes `bytes` to `path` unless an identical file is already there
 * (core/atomic-file.ts: a reader never sees half a file, a full disk leaves no
 * temp file and throws LB_ERR_NO_SPACE naming the path). Returns the path.
 */
export async function writeModelFile (path: string, bytes: Buffer): Promise<string> {
  const current = await readFile(path).catch(() => null)
  if (current !== null && current.equals(bytes)) return path
  writeFileAtomic(path, bytes, 0o644)
  return path
}
