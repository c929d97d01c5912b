// Client connections (core/worker/connections.ts) on a real shared buffer: each
// entry point's open count, peak and accepts beside the process's, one
// global.max_connections over every entry point, and a dead worker's share
// taken off both (clearGauges).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createShm } from '../../core/shm/buffer.js'
import { clearGauges, epConnBase, sumEntryPoint, sumGlobal } from '../../core/shm/counters.js'
import { EC_OPEN, EC_PEAK, EP_ACCEPTS, G_ACCEPTS, G_REFUSED, H_CONN_ACTIVE } from '../../core/shm/layout.js'
import { Connections } from '../../core/worker/connections.js'

test('connections are counted per entry point across workers, under one cap, and a dead worker\'s are taken off', () => {
  const shm = createShm(2)
  /** [open, peak, accepts] of entry point `ep` */
  const ep = (i: number): number[] => [Atomics.load(shm.i32, epConnBase(i) + EC_OPEN), Atomics.load(shm.i32, epConnBase(i) + EC_PEAK), sumEntryPoint(shm, i, EP_ACCEPTS)]
  /** [open, accepts, refused] of the process */
  const all = (): number[] => [Atomics.load(shm.i32, H_CONN_ACTIVE), sumGlobal(shm, G_ACCEPTS), sumGlobal(shm, G_REFUSED)]
  const max = 3
  const web0 = new Connections(shm, 0, 0, max) // worker 0, entry point 0
  const tls0 = new Connections(shm, 0, 1, max) // worker 0, entry point 1
  const tls1 = new Connections(shm, 1, 1, max) // worker 1, entry point 1

  assert.deepEqual([web0.open(), tls0.open(), tls1.open()], [true, true, true])
  assert.equal(tls1.open(), false, 'the fourth connection is over the cap of 3, whichever its entry point')
  tls1.close()
  assert.deepEqual([ep(0), ep(1), all()], [[1, 1, 1], [2, 2, 3], [3, 4, 1]], 'a refused connection is accepted, never a peak')
  web0.close()
  assert.deepEqual([ep(0), ep(1), all()], [[0, 1, 1], [2, 2, 3], [2, 4, 1]], 'the peak stays')

  clearGauges(shm, 1) // worker 1 died holding one connection of entry point 1
  assert.deepEqual([ep(0), ep(1), all()], [[0, 1, 1], [1, 2, 3], [1, 4, 1]])
  tls0.close()
  assert.deepEqual([ep(1), all()], [[0, 2, 3], [0, 4, 1]])
})
