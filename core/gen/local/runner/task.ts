// The piscina worker file. Importing it initialises llama.cpp once per worker
// thread (model-host.ts, top-level await), so the first job does not pay for
// it. Each call handles one task: a job (streamed over its MessagePort, which
// also carries the cancel message and the final result) or an unload.

import type { MessagePort } from 'node:worker_threads'
import { embed } from './embed.js'
import { generate } from './generate.js'
import { unload } from './model-host.js'
import type { Done, Failed, JobSpec, RunnerConf, StatusError, ToTask, WorkerResult, WorkerTask } from '../protocol.js'

async function job (id: number, spec: JobSpec, conf: RunnerConf, port: MessagePort): Promise<Done | Failed> {
  const ac = new AbortController()
  port.on('message', (m: ToTask) => {
    switch (m.type) {
      case 'cancel': ac.abort(); break
      default: { const never: never = m.type; throw new Error(`unknown message ${String(never)}`) }
    }
  })
  let result: Done | Failed
  try {
    result = { type: 'done', id, result: spec.kind === 'embed' ? await embed(spec, conf, ac.signal) : await generate(id, spec, conf, port, ac.signal) }
  } catch (e) {
    const status = (e as Partial<StatusError>).status
    result = { type: 'failed', id, status: typeof status === 'number' ? status : 500, message: (e as Error).message }
  }
  port.postMessage(result)
  port.close()
  return result
}

export default async function run (task: WorkerTask): Promise<WorkerResult> {
  switch (task.type) {
    case 'job':
      return await job(task.id, task.job, task.conf, task.port)
    case 'unload':
      await unload(task.modelPath)
      return { type: 'unloaded' }
    case 'warm':
      return { type: 'warm' }
    default: { const never: never = task; throw new Error(`unknown task ${JSON.stringify(never)}`) }
  }
}
