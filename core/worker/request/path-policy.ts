// An entry point's request-path settings, compiled once per generation
// (request-path.ts compilePathPolicy). A file of its own so the per-request
// Ctx can carry one without importing the normaliser and its config.
export interface PathPolicy {
  readonly mergeSlashes: boolean
  /** by byte value: true when its escape is refused (only the ambiguous ones can be) */
  readonly refused: readonly boolean[]
}
