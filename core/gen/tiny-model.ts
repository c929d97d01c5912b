// The project's own default model, so a fresh clone answers /api/generate with
// no download: a ~50 KB GGUF v3 file, llama architecture (embedding 16, one
// block, 2 heads, feed-forward 32, f32 tensors) over a byte-level vocabulary
// (<unk>, <s>, </s> and the 256 byte tokens <0x00>..<0xFF>), so any input
// tokenizes. The weights come from a fixed-seed PRNG, so every build writes the
// same bytes.
//
// It is not trained. To make its output look like text rather than noise, every
// token embedding carries a constant 1 in dimension 0 and the other weights are
// small: after the final RMS norm, dimension 0 dominates, and column 0 of the
// output matrix holds the log frequency of each byte in English text. The model
// is therefore roughly a unigram model of letters and spaces that ends its text
// (</s>) after a few hundred tokens.

import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { GGUF_MAGIC, GGUF_TYPE } from './gguf.js'

export const TINY_MODEL_NAME = 'lb-tiny:latest'

const N_EMBD = 16
const N_FF = 32
const N_HEAD = 2
const N_VOCAB = 259
const N_CTX = 4096
const ALIGN = 32
const GGML_F32 = 0
const SEED = 0x6c62 // "lb"

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
const EOS_FREQ = 8

function tokenText (id: number): string {
  if (id === 0) return '<unk>'
  if (id === 1) return '<s>'
  if (id === 2) return '</s>'
  return `<0x${(id - 3).toString(16).toUpperCase().padStart(2, '0')}>`
}

interface Tensor { name: string, dims: number[], data: Float32Array }

function tensors (): Tensor[] {
  const rnd = prng(SEED)
  const fill = (n: number, scale: number): Float32Array => {
    const a = new Float32Array(n)
    for (let i = 0; i < n; i++) a[i] = rnd() * scale
    return a
  }
  const ones = (n: number): Float32Array => new Float32Array(n).fill(1)
  // ggml dims are [columns, rows]: a weight with dims [in, out] maps in -> out.
  const embd = fill(N_EMBD * N_VOCAB, 0.5)
  for (let t = 0; t < N_VOCAB; t++) embd[t * N_EMBD] = 1
  const out = fill(N_EMBD * N_VOCAB, 0.3)
  // After the norm, dimension 0 is about 2.7, so logit ≈ 2.7 * out[t][0]; aim at ln(freq).
  for (let t = 0; t < N_VOCAB; t++) {
    const ch = t >= 3 ? String.fromCharCode(t - 3) : ''
    const f = t === 2 ? EOS_FREQ : FREQ[ch] ?? 0.001
    out[t * N_EMBD] = Math.log(f) / 2.7
  }
  return [
    { name: 'token_embd.weight', dims: [N_EMBD, N_VOCAB], data: embd },
    { name: 'output_norm.weight', dims: [N_EMBD], data: ones(N_EMBD) },
    { name: 'output.weight', dims: [N_EMBD, N_VOCAB], data: out },
    { name: 'blk.0.attn_norm.weight', dims: [N_EMBD], data: ones(N_EMBD) },
    { name: 'blk.0.attn_q.weight', dims: [N_EMBD, N_EMBD], data: fill(N_EMBD * N_EMBD, 0.1) },
    { name: 'blk.0.attn_k.weight', dims: [N_EMBD, N_EMBD], data: fill(N_EMBD * N_EMBD, 0.1) },
    { name: 'blk.0.attn_v.weight', dims: [N_EMBD, N_EMBD], data: fill(N_EMBD * N_EMBD, 0.1) },
    { name: 'blk.0.attn_output.weight', dims: [N_EMBD, N_EMBD], data: fill(N_EMBD * N_EMBD, 0.05) },
    { name: 'blk.0.ffn_norm.weight', dims: [N_EMBD], data: ones(N_EMBD) },
    { name: 'blk.0.ffn_gate.weight', dims: [N_EMBD, N_FF], data: fill(N_EMBD * N_FF, 0.1) },
    { name: 'blk.0.ffn_up.weight', dims: [N_EMBD, N_FF], data: fill(N_EMBD * N_FF, 0.1) },
    { name: 'blk.0.ffn_down.weight', dims: [N_FF, N_EMBD], data: fill(N_FF * N_EMBD, 0.05) },
  ]
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

/** The complete file, byte for byte the same on every call. */
export function tinyModelBytes (): Buffer {
  const ids = Array.from({ length: N_VOCAB }, (_, i) => i)
  const kvs: Kv[] = [
    ['general.architecture', 'str', 'llama'],
    ['general.name', 'str', 'lb-tiny'],
    ['general.file_type', 'u32', 0],
    ['llama.context_length', 'u32', N_CTX],
    ['llama.embedding_length', 'u32', N_EMBD],
    ['llama.block_count', 'u32', 1],
    ['llama.feed_forward_length', 'u32', N_FF],
    ['llama.attention.head_count', 'u32', N_HEAD],
    ['llama.attention.head_count_kv', 'u32', N_HEAD],
    ['llama.rope.dimension_count', 'u32', N_EMBD / N_HEAD],
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
  const ts = tensors()
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
    for (const d of t.dims) h.u64(d)
    h.u32(GGML_F32)
    h.u64(offset)
    offset += Math.ceil(t.data.byteLength / ALIGN) * ALIGN
  }
  h.pad()
  for (const t of ts) {
    h.raw(Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength))
    h.pad()
  }
  return Buffer.concat(h.parts, h.length)
}

/** Writes the tiny model to `path` unless an identical file is already there. Returns the path. */
export async function ensureTinyModel (path: string): Promise<string> {
  const bytes = tinyModelBytes()
  const current = await readFile(path).catch(() => null)
  if (current !== null && current.equals(bytes)) return path
  await mkdir(dirname(path), { recursive: true })
  const tmp = `${path}.${process.pid}.tmp`
  await writeFile(tmp, bytes)
  await rename(tmp, path)
  return path
}
