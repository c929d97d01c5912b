// Per-request cost of deciding the path and the Host (DataPlane.handle, before
// routing): the fast scan of an already normal path, normalisation of one that
// needs work, and the Host check of a repeated and of a new valid value.
import { DEFAULT_POLICY, normalizePath } from '../../core/worker/request/request-path.js'
import { checkHost } from '../../core/worker/request/request-host.js'
import { browserCtx } from './fixtures.js'
import { type Result, isMain, runSuite } from './harness.js'

export async function run (): Promise<Result[]> {
  const plain = '/static/js/app.3f9c2b.js'
  const long = '/api/v1/projects/4711/repositories/lb/commits/d021014/files/core/worker/request/request-path.ts'
  const work = '/static/./js//%61pp.3f9c2b.js'
  const attack = '/x/../%70rivate/%2e/secret.txt'
  const ctx = browserCtx()
  const hosts = ['a.example.com', 'b.example.com']
  let i = 0
  let sink = 0
  const norm = (p: string): void => {
    const r = normalizePath(p, DEFAULT_POLICY)
    sink += typeof r === 'string' ? r.length : 1
  }
  const result = await runSuite('request path', {
    [`normal path, ${plain.length} chars (scan only)`]: () => norm(plain),
    [`normal path, ${long.length} chars (scan only)`]: () => norm(long),
    'path with "/./", "//" and an escape': () => norm(work),
    'path with "..", "." and escapes': () => norm(attack),
    'Host check, same value as the last request': () => { sink += checkHost(ctx).length },
    'Host check, a new value each time': () => {
      ctx.headers[1] = hosts[i++ & 1]!
      sink += checkHost(ctx).length
    },
  })
  if (sink < 0) console.log('unreachable')
  return result
}

if (isMain(import.meta.url)) await run()
