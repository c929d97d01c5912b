// The install recipe of conf/lb.service, done for real in a scratch root:
// `npm pack` → `npm install -g` into ROOT/usr/local gives a working `lb`;
// `systemd-analyze verify` accepts the unit and finds `lb` on systemd's search
// path inside ROOT; the unit's own commands, run as an unprivileged user with
// the shipped config in a read-only folder and systemd's STATE_DIRECTORY and
// RUNTIME_DIRECTORY, check, serve and tell systemd READY=1 (Type=notify);
// without those variables the paths point into the read-only folder and both
// commands fail with one line naming it.
// Plugins outside the install, by path and by package name (a package with lb
// as an optional peer, installed with npm), load into the installed lb.
import assert from 'node:assert/strict'
import { type ChildProcess, type SpawnOptions, execFileSync, spawn, spawnSync } from 'node:child_process'
import { chmodSync, chownSync, cpSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { type TestContext, test } from 'node:test'
import { ROOT, listeningPort, request, shippedConfig, startBackend, tempDir } from '../helpers.js'
import { mwConfig, writeStampPackage } from '../plugins/setup.js'
import { requireTool } from '../admin/util.js'
import { startNotifySocket } from '../notify-socket.js'

const NOBODY = 65534
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version

/** The unit's Exec lines, as argv. */
function unitCommand (unit: string, key: string): string[] {
  const m = new RegExp(`^${key}=(.+)$`, 'm').exec(unit)
  assert.ok(m !== null, `conf/lb.service has ${key}=`)
  return m[1]!.trim().split(/\s+/)
}

/** Starts `lb run` (however it is invoked) and waits for its log to match `ready`; killed after the test. */
async function runUntil (t: TestContext, cmd: string, args: string[], opts: SpawnOptions, ready: RegExp):
Promise<{ proc: ChildProcess, exited: Promise<number | null>, err: () => string }> {
  const proc = spawn(cmd, args, { ...opts, stdio: ['ignore', 'ignore', 'pipe'] })
  let err = ''
  proc.stderr!.on('data', (d: Buffer) => { err += d.toString() })
  const exited = new Promise<number | null>((resolve) => proc.on('exit', resolve))
  t.after(() => { if (proc.exitCode === null) proc.kill('SIGKILL') })
  for (const end = Date.now() + 60_000; !ready.test(err);) {
    assert.ok(proc.exitCode === null && Date.now() < end, `lb run did not start: ${err}`)
    await new Promise((r) => setTimeout(r, 50))
  }
  return { proc, exited, err: () => err }
}

test('install: npm pack, npm install -g in a scratch prefix, systemd-analyze verify, the unit\'s commands as nobody', { timeout: 600_000 }, async (t) => {
  const root = tempDir('lb-install-')
  chmodSync(root, 0o755)
  // the test command has built dist/; the package's prepack runs the same build (checked below)
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
  assert.equal(pkg.scripts.prepack, 'npm run build', 'npm pack builds first, so a clone that was never built packs a working lb')
  execFileSync('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', root], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] })
  const tgz = join(root, `lb-${VERSION}.tgz`)
  const files = execFileSync('tar', ['tzf', tgz], { encoding: 'utf8' }).trim().split('\n')
  for (const f of ['package/dist/core/cli.js', 'package/conf/lb.toml', 'package/conf/lb.service', 'package/examples/backend.js', 'package/README.md']) {
    assert.ok(files.includes(f), `the package has ${f}`)
  }
  assert.deepEqual(files.filter((f) => /^package\/(test|bench|dist\/test|dist\/bench|\.ci)\//.test(f)), [], 'no tests or benchmarks in the package')

  const prefix = join(root, 'usr', 'local')
  execFileSync('npm', ['install', '-g', '--prefix', prefix, '--omit=optional', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', tgz],
    { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] })
  const lb = join(prefix, 'bin', 'lb')
  assert.equal(execFileSync(lb, ['version'], { encoding: 'utf8' }), `lb ${VERSION}\n`)
  const unit = readFileSync(join(ROOT, 'conf', 'lb.service'), 'utf8')

  await t.test('plugins outside the install import lb/plugin: by path next to the config, and a package with lb as an optional peer', async (t) => {
    const cfg = join(root, 'site')
    mkdirSync(cfg)
    cpSync(join(prefix, 'lib', 'node_modules', 'lb', 'examples', 'plugins', 'request-id.js'), join(cfg, 'request-id.js'))
    // the plugin package as its author publishes it (npm pack) and a user installs it: npm must not fetch an `lb` for it
    writeStampPackage(join(root, 'src'))
    execFileSync('npm', ['pack', '--silent', '--pack-destination', root], { cwd: join(root, 'src', 'lb-plugin-stamp'), stdio: ['ignore', 'ignore', 'pipe'] })
    execFileSync('npm', ['install', '--prefix', cfg, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', join(root, 'lb-plugin-stamp-1.0.0.tgz')],
      { cwd: cfg, stdio: ['ignore', 'ignore', 'pipe'] })
    assert.deepEqual(readdirSync(join(cfg, 'node_modules')).filter((d) => !d.startsWith('.')), ['lb-plugin-stamp'], 'only the plugin is installed, no lb from the registry')
    const backend = await startBackend('web', (req, res) => res.end(String(req.headers['x-request-id'])))
    t.after(() => backend.close())
    const text = mwConfig(backend.address, '[middlewares.ids]\ntype = "./request-id.js"\n\n[middlewares.stamp]\ntype = "lb-plugin-stamp"\n', { '/': ['ids', 'stamp'] })
    writeFileSync(join(cfg, 'lb.toml'), `[global]\nworkers = 1\naccess_log = "off"\n\n${text.replace('{{PORT}}', '0')}`)
    const check = spawnSync(lb, ['check', '-c', join(cfg, 'lb.toml')], { cwd: cfg, encoding: 'utf8' })
    assert.equal(check.status, 0, check.stderr)
    const { proc, exited, err } = await runUntil(t, lb, ['run', '-c', join(cfg, 'lb.toml')], { cwd: cfg }, /"msg":"ready"/)
    const r = await request(`http://127.0.0.1:${listeningPort(err(), 'web')}/`)
    assert.equal(r.status, 200, r.body)
    assert.equal(r.headers['x-request-id'], r.body, 'request-id (by path) sent its id upstream and back')
    assert.equal(r.headers['x-stamp'], 'clock runs every 10ms', 'lb-plugin-stamp (by package name) ran on the installed lb\'s clock')
    proc.kill('SIGTERM')
    assert.equal(await exited, 0, err())
  })

  await t.test('systemd-analyze verify accepts the unit, finding lb where npm put it', (t) => {
    const analyze = requireTool(t, 'systemd-analyze', 'systemd')
    if (analyze === null) return
    mkdirSync(join(root, 'etc', 'systemd', 'system'), { recursive: true })
    // the unit files a system has, and ExecReload's /bin/kill (merged /usr, as Debian)
    cpSync('/usr/lib/systemd/system', join(root, 'usr', 'lib', 'systemd', 'system'), { recursive: true })
    mkdirSync(join(root, 'usr', 'bin'), { recursive: true })
    cpSync('/bin/kill', join(root, 'usr', 'bin', 'kill'))
    symlinkSync('usr/bin', join(root, 'bin'))
    assert.match(unit, /^Type=notify$/m, 'lb tells systemd when it is ready')
    assert.match(unit, /^NotifyAccess=all$/m, 'through systemd-notify, a child process')
    writeFileSync(join(root, 'etc', 'systemd', 'system', 'lb.service'), unit)
    const r = spawnSync(analyze, ['verify', `--root=${root}`, '--man=no', '/etc/systemd/system/lb.service'], { encoding: 'utf8' })
    assert.equal(`${r.stdout}${r.stderr}`, '')
    assert.equal(r.status, 0)
  })

  await t.test('the unit\'s commands run as nobody with a read-only /etc/lb', async (t) => {
    if (process.getuid?.() !== 0) { t.skip('needs root to switch to the user nobody (setpriv)'); return }
    const etc = join(root, 'etc', 'lb')
    mkdirSync(etc, { recursive: true })
    const { text } = await shippedConfig()
    writeFileSync(join(etc, 'lb.toml'), text)
    chmodSync(join(etc, 'lb.toml'), 0o444)
    chmodSync(etc, 0o555)
    const state = join(root, 'var', 'lib', 'lb')
    const runtime = join(root, 'run', 'lb')
    for (const d of [state, runtime]) {
      mkdirSync(d, { recursive: true, mode: 0o755 })
      chmodSync(d, 0o750)
      chownSync(d, NOBODY, NOBODY)
    }
    // as systemd starts them: as the unit's user, lb found on the search path, the directories in the environment
    const argv = (key: string): string[] => unitCommand(unit, key).map((a) => a === '/etc/lb/lb.toml' ? join(etc, 'lb.toml') : a)
    // systemd's notification socket (Type=notify): lb, as nobody, must reach it through systemd-notify
    const notify = await startNotifySocket(t, join(root, 'notify.sock'))
    const env = { PATH: `${join(prefix, 'bin')}:/usr/local/bin:/usr/bin:/bin`, HOME: state, STATE_DIRECTORY: state, RUNTIME_DIRECTORY: runtime, NOTIFY_SOCKET: notify.path }
    const asNobody = ['--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups', '--']
    const check = spawnSync('setpriv', [...asNobody, ...argv('ExecStartPre')], { env, encoding: 'utf8' })
    assert.equal(check.status, 0, check.stderr)
    assert.match(check.stdout, /test is successful/)

    const { proc, exited, err } = await runUntil(t, 'setpriv', [...asNobody, ...argv('ExecStart')], { env }, /"msg":"ready"/)
    assert.equal((await request(`http://127.0.0.1:${listeningPort(err(), 'web')}/health`)).status, 200)
    assert.match((await notify.next('READY=1')).message.join(' '), /STATUS=serving web=http:/, 'systemd hears READY=1')
    const sock = join(runtime, 'lb.sock')
    assert.match(execFileSync('socat', ['stdio', `unix-connect:${sock}`], { input: 'show info\n', encoding: 'utf8' }), /^Name: lb\n/)
    proc.kill('SIGTERM')
    assert.equal(await exited, 0, err())
    await notify.next('STOPPING=1')

    // without systemd's variables the shipped paths fall back to ../run: ROOT/etc/run, inside the read-only folder
    const bare = { PATH: env.PATH, HOME: state }
    const bad = spawnSync('setpriv', [...asNobody, ...argv('ExecStartPre')], { env: bare, encoding: 'utf8' })
    assert.equal(bad.status, 1)
    assert.ok(bad.stderr.startsWith(`lb: global.state_dir (${root}/etc/run): ${root}/etc/run is missing and ${root}/etc is not writable by uid ${NOBODY}; `), bad.stderr)
    assert.match(bad.stderr, /test failed/)
    const run = spawnSync('setpriv', [...asNobody, ...argv('ExecStart')], { env: bare, encoding: 'utf8', timeout: 60_000 })
    assert.equal(run.status, 1)
    const lines = run.stderr.trim().split('\n')
    assert.equal(lines.length, 1, `one line, no stack trace: ${run.stderr}`)
    assert.match(lines[0]!, /"code":"LB_ERR_PATH"/)
    assert.match(lines[0]!, /global\.state_dir \(.*\/etc\/run\)/)
  })
})
