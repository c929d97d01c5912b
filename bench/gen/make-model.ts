// Writes a benchmark model: an untrained llama-architecture GGUF large enough
// that decoding is dominated by the matrix work batching amortises (a batch of
// sequences reads each weight once), unlike the 260K-parameter fixtures where
// per-token overhead dominates. Same design as the built-in tiny model
// (core/gen/models/llama-gguf.ts): deterministic weights, byte-level vocabulary, and
// </s> made rare so that a request runs to its num_predict. The default is
// embedding 512, 8 blocks, feed-forward 1536, 8 heads, f32: 27.5M parameters,
// a 110 MB file (--type f16 halves it, but batching gained less with f16
// weights here: 2.7x against 3.9x at 8 requests, bench/RESULTS.md). The file
// goes to a temporary folder; never commit it.
//
//   node dist/bench/gen/make-model.js [--embd 512] [--ff 1536] [--heads 8] [--blocks 8] [--type f32] [--out file.gguf]
//
// Prints the file's path (the default is $TMPDIR/lb-bench-models/lb-bench-<embd>x<blocks>-<type>.gguf);
// an identical file already there is left as it is.

import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { llamaGgufBytes, writeModelFile, type LlamaDims } from '../../core/gen/models/llama-gguf.js'

const args = process.argv.slice(2)
const opt = (name: string, def: string): string => { const i = args.indexOf(name); return i >= 0 ? args[i + 1]! : def }
const type = opt('--type', 'f32')
if (type !== 'f16' && type !== 'f32') throw new Error('--type must be f16 or f32')
const dims: LlamaDims = {
  name: 'lb-bench',
  embd: Number(opt('--embd', '512')),
  ff: Number(opt('--ff', '1536')),
  heads: Number(opt('--heads', '8')),
  blocks: Number(opt('--blocks', '8')),
  ctx: 4096,
  type,
  // Per mille, like the bytes' frequencies: about one </s> in a million tokens.
  eosFreq: 0.001,
}
const out = opt('--out', join(tmpdir(), 'lb-bench-models', `lb-bench-${dims.embd}x${dims.blocks}-${dims.type}.gguf`))
console.log(await writeModelFile(out, llamaGgufBytes(dims)))
