// The project's own default model, so a fresh clone answers /api/generate with
// no download: a ~50 KB GGUF v3 file written by llama-gguf.ts (embedding 16,
// one block, 2 heads, feed-forward 32, f32 tensors, byte-level vocabulary), so
// every build writes the same bytes.
//
// It is not trained: roughly a unigram model of English letters and spaces
// (see llama-gguf.ts) that ends its text (</s>) after a few hundred tokens.

import { llamaGgufBytes, writeModelFile, type LlamaDims } from './llama-gguf.js'

export const TINY_MODEL_NAME = 'lb-tiny:latest'

const TINY: LlamaDims = { name: 'lb-tiny', embd: 16, ff: 32, heads: 2, blocks: 1, ctx: 4096, type: 'f32', eosFreq: 8 }

/** The complete file, byte for byte the same on every call. */
export function tinyModelBytes (): Buffer {
  return llamaGgufBytes(TINY)
}

/** Writes the tiny model to `path` unless an identical file is already there. Returns the path. */
export async function ensureTinyModel (path: string): Promise<string> {
  return await writeModelFile(path, tinyModelBytes())
}
