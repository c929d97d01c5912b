// Whole response bodies wait here for the end of the loop turn
// (core/net/turn.ts), copied out of the upstream read buffer they arrived in,
// so that a small response goes out in one corked write with the others of
// its turn. The space is reused from its start every turn. A body longer than
// STAGE_MAX, or one that no longer fits this turn, is written at once (uWS
// does not cork more than 16 KiB either).
import { currentTurn } from '../../net/turn.js'

export const STAGING = Buffer.allocUnsafe(256 * 1024)
const STAGE_MAX = 16 * 1024
let stagingUsed = 0
let stagingTurn = -1

/**
 * Copies buf[start, end) into this turn's staging space; returns where it
 * starts in STAGING, valid until the end of this turn, or -1 when it does not fit.
 */
export function stage (buf: Buffer, start: number, end: number): number {
  const n = end - start
  if (stagingTurn !== currentTurn()) {
    stagingTurn = currentTurn()
    stagingUsed = 0
  }
  if (n > STAGE_MAX || stagingUsed + n > STAGING.length) return -1
  buf.copy(STAGING, stagingUsed, start, end)
  const at = stagingUsed
  stagingUsed += n
  return at
}
