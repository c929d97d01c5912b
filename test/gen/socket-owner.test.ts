// Two processes on one generation socket path (core/gen/http/socket.ts), as an
// old lb stopping and a new one starting, or a new one that took the path
// after the file was removed: whatever the old one does on its way out, the
// new one's file stays and answers. Real processes, real unix sockets, on the
// machine's file system (ext4 gives a new file the inode just freed).
import { strict as assert } from 'node:assert'
import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, unlinkSync } from 'node:fs'
import http from 'node:http'
import { join } from 'node:path'
import { test } from 'node:test'
import { ROOT, tempDir, waitFor } from '../helpers.js'

const FIXTURE = join(ROOT, 'dist', 'test', 'fixtures', 'gen', 'owned-socket.js')

interface Owner { proc: ChildProcess, send: (command: string) => Promise<void>, log: () => string }

async function owner (path: string): Promise<Owner> {
  const proc = spawn(process.execPath, [FIXTURE, path], { stdio: ['pipe', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  proc.stdout!.on('data', (d: Buffer) => { out += d.toString() })
  proc.stderr!.on('data', (d: Buffer) => { err += d.toString() })
  const seen = (line: string): Promise<string> => waitFor(() => out.split('\n').includes(line) || proc.exitCode !== null, `"${line}" from ${path}'s owner (stderr: ${err})`, 10_000, 10).then(() => {
    assert.equal(proc.exitCode, null, `the owner exited: ${err}`)
    return line
  })
  await seen('ready')
  return { proc, send: async (command) => { proc.stdin!.write(command + '\n'); await seen(`${command} done`) }, log: () => err }
}

/** The pid that answers on the socket at `path`, or the error. */
function answer (path: string): Promise<string> {
  return new Promise((resolve) => {
    http.get({ socketPath: path, path: '/' }, (res) => {
      let body = ''
      res.on('data', (d: Buffer) => { body += d.toString() })
      res.on('end', () => resolve(body))
    }).on('error', (e) => resolve(e.message))
  })
}

test('an old owner that stops after a new one bound the path leaves the new file alone', async (t) => {
  const path = join(tempDir(), 'gen.sock')
  const old = await owner(path)
  t.after(() => old.proc.kill('SIGKILL'))
  await old.send('stop') // the old lb stops accepting, then waits for its runner
  const next = await owner(path) // meanwhile the new lb takes the path
  t.after(() => next.proc.kill('SIGKILL'))
  await old.send('remove') // the old lb, exiting late
  assert.ok(existsSync(path), 'the new owner\'s file is still there')
  assert.equal(await answer(path), String(next.proc.pid))
})

test('an owner whose file was removed and taken by another process leaves it alone when it stops', async (t) => {
  const path = join(tempDir(), 'gen.sock')
  const first = await owner(path)
  t.after(() => first.proc.kill('SIGKILL'))
  // paused, so that its check (every second) cannot bind again before the second one takes the path
  first.proc.kill('SIGSTOP')
  unlinkSync(path) // a tmp cleaner, an operator
  const second = await owner(path).finally(() => first.proc.kill('SIGCONT'))
  t.after(() => second.proc.kill('SIGKILL'))
  await waitFor(() => /another process listens on the generation socket path now/.test(first.log()), 'the first owner to see the path taken', 5000)
  await first.send('stop')
  await first.send('remove')
  assert.ok(existsSync(path), 'the second owner\'s file is still there')
  assert.equal(await answer(path), String(second.proc.pid))
})
