// nginx as the reference proxy: started by the campaign on a free loopback
// port with its own temp folder (removed on stop), proxying everything to one
// backend with HTTP/1.1 upstream keep-alive off, as a correct proxy would.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, sleep } from '../../helpers.js'

export interface Nginx { readonly port: number, stop (): Promise<void> }

/**
 * `defaults`: the location as a user who changed nothing writes it (`proxy_pass` alone: nginx speaks HTTP/1.0 to
 * the upstream and closes each connection), as test/e2e/node-engine-clients.test.ts puts nginx in front of lb.
 */
export async function startNginx (backendPort: number, defaults = false): Promise<Nginx> {
  try { execFileSync('sh', ['-c', 'command -v nginx']) } catch { throw new Error('nginx is not installed: apt-get install -y nginx-light') }
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'lb-fuzz-nginx-'))
  const conf = join(dir, 'nginx.conf')
  writeFileSync(conf, `worker_processes 1;
error_log ${dir}/error.log crit;
pid ${dir}/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  client_max_body_size 100m;
  large_client_header_buffers 4 128k;  # about what lb (uWS) takes: a 70 KB header passes, 200 KB does not
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://127.0.0.1:${backendPort};
      ${defaults ? '' : 'proxy_http_version 1.1; proxy_set_header Connection "";'}
    }
  }
}
`)
  const args = ['-p', dir, '-c', conf, '-g', `daemon off;${process.getuid?.() === 0 ? ' user root root;' : ''}`]
  const proc: ChildProcess = spawn('nginx', args, { stdio: ['ignore', 'ignore', 'pipe'] })
  let err = ''
  proc.stderr!.on('data', (d: Buffer) => { err += d.toString() })
  for (const end = Date.now() + 5000; ;) {
    if (proc.exitCode !== null) throw new Error(`nginx exited: ${err}`)
    const up = await new Promise<boolean>((r) => {
      const s = net.connect(port, '127.0.0.1', () => { s.destroy(); r(true) })
      s.on('error', () => r(false))
    })
    if (up) break
    if (Date.now() > end) throw new Error(`nginx did not start: ${err}`)
    await sleep(20)
  }
  return {
    port,
    stop: async () => {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once('exit', r))
        proc.kill('SIGQUIT')
        await exited
      }
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
