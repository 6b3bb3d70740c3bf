import t from 'tap'
import { execFileSync, spawn } from 'node:child_process'
import { createHash, createPublicKey, generateKeyPairSync } from 'node:crypto'
import { closeSync, constants, mkdtempSync, openSync, readFileSync, writeFileSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { rawRequest } from './fixtures/http.js'
import { freePort, freePorts } from './fixtures/stack.js'
import { startEchoUpstream } from './fixtures/upstream.js'

// The CLI runs as its own process, from the TypeScript source with the loader tap uses.
const CLI = new URL('../src/cli.ts', import.meta.url).pathname
const SECRET = 'cli-client-secret-value-xyz'
const COOKIE = 'cli-cookie-secret-0123456789abcdefghijkl'

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

function cli(args: string[], env: Record<string, string> = {}): { done: Promise<Run>; kill(signal: NodeJS.Signals): void; stdout(): string } {
  const child = spawn(process.execPath, [...process.execArgv, CLI, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
  const done = new Promise<Run>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })))
  return { done, kill: (s) => child.kill(s), stdout: () => stdout }
}

function configFile(config: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'ogw-cli-'))
  const path = join(dir, 'gateway.yaml')
  writeFileSync(path, stringify(config))
  return path
}

// managementPort 0 (off) unless a test asks: parallel test files must not bind the default 9091.
const valid = (port: number, upstream: string, managementPort = 0) => ({
  server: { host: '127.0.0.1', port, publicUrl: `http://127.0.0.1:${port}`, managementPort },
  provider: { issuer: 'http://127.0.0.1:9', clientId: 'gw', clientSecret: '${CLI_SECRET}', allowInsecureHttp: true },
  cookies: { secrets: ['${CLI_COOKIE}'], secure: false },
  upstreams: [{ name: 'app', target: upstream, auth: 'none' }],
  log: { level: 'warn' },
})

t.test('check prints the effective configuration with secrets masked, exit 0', async (t) => {
  const path = configFile(valid(8080, 'http://127.0.0.1:3000'))
  const run = await cli(['check', '--config', path], { CLI_SECRET: SECRET, CLI_COOKIE: COOKIE }).done
  t.equal(run.code, 0, run.stderr)
  t.match(run.stdout, /clientId: gw/)
  t.match(run.stdout, /\*\*\*\*\*\*\*\*/)
  t.notMatch(run.stdout, SECRET)
  t.notMatch(run.stdout, COOKIE)
  t.match(run.stdout, /timeoutMs: 10000/, 'defaults are shown')
})

t.test('an invalid file exits 2 naming the key path, before listening', async (t) => {
  const config = valid(8080, 'not-a-url')
  const path = configFile(config)
  for (const command of [['check'], []]) {
    const run = await cli([...command, '--config', path], { CLI_SECRET: SECRET, CLI_COOKIE: COOKIE }).done
    t.equal(run.code, 2, `${command.join(' ') || 'run'}`)
    t.match(run.stderr, /upstreams\[0\]\.target/)
    t.notMatch(run.stderr, SECRET)
  }
})

t.test('an unset environment variable exits 2 naming the key and the variable', async (t) => {
  const path = configFile(valid(8080, 'http://127.0.0.1:3000'))
  const run = await cli(['check', '--config', path], { CLI_COOKIE: COOKIE }).done
  t.equal(run.code, 2)
  t.match(run.stderr, /provider\.clientSecret/)
  t.match(run.stderr, /CLI_SECRET/)
})

t.test('a missing file and a bad command line exit 2', async (t) => {
  t.equal((await cli(['check', '--config', '/nonexistent/gateway.yaml']).done).code, 2)
  t.equal((await cli(['frobnicate']).done).code, 2)
  t.equal((await cli(['--no-such-flag']).done).code, 2)
})

async function listening(origin: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await rawRequest(origin, '/healthz').then(() => true, () => false)) return
    await new Promise((r) => setTimeout(r, 100))
  }
}

t.test('run serves, with its management listener; SIGTERM: /readyz 503 at once, in-flight requests finish, a final line, exit 0', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const [port, managementPort] = (await freePorts(2)) as [number, number]
  const path = configFile({ ...valid(port, upstream.url, managementPort), log: { level: 'info' } })
  const proc = cli(['--config', path], { CLI_SECRET: SECRET, CLI_COOKIE: COOKIE })
  const origin = `http://127.0.0.1:${port}`
  const management = `http://127.0.0.1:${managementPort}`
  await listening(management)
  t.equal((await rawRequest(management, '/healthz')).status, 200, 'the management listener answers')
  t.equal((await rawRequest(origin, '/healthz')).status, 200, 'the public port proxies /healthz to the upstream (auth: none)')
  t.notMatch((await rawRequest(origin, '/metrics')).body, /openid_gateway_/, 'metrics are not served on the public port')

  const inFlight = rawRequest(origin, '/slow?ms=800', { headers: { accept: 'application/json' } })
  await new Promise((r) => setTimeout(r, 200))
  proc.kill('SIGTERM')
  await new Promise((r) => setTimeout(r, 100))
  const ready = await rawRequest(management, '/readyz')
  t.equal(ready.status, 503, 'while draining, /readyz says not ready')
  t.match(ready.json(), { status: 'draining' })
  const res = await inFlight
  t.equal(res.status, 200, 'the in-flight request completed')
  const run = await proc.done
  t.equal(run.code, 0, run.stderr)
  // The last line logged (by its time: a line of the drained request may leave the stdout pipe's
  // buffer after it) says it stopped.
  const lines = run.stdout.trim().split('\n').map((line) => JSON.parse(line) as { msg?: string; signal?: string; time: number })
  const stopped = lines.find((line) => line.msg === 'stopped')
  t.match(stopped, { signal: 'SIGTERM' }, 'a line says it stopped', { tail: run.stdout.slice(-600) })
  t.notOk(lines.some((line) => line.time > (stopped?.time ?? 0)), 'and nothing was logged after it')
  await t.rejects(rawRequest(origin, '/status/204'), 'no longer listening')
  await t.rejects(rawRequest(management, '/healthz'), 'nor the management listener')
})

t.test('SIGTERM: a request longer than server.shutdownTimeoutMs does not hold the exit', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const port = await freePort()
  const config = valid(port, upstream.url)
  const path = configFile({ ...config, server: { ...config.server, shutdownTimeoutMs: 500 } })
  const proc = cli(['--config', path], { CLI_SECRET: SECRET, CLI_COOKIE: COOKIE })
  const origin = `http://127.0.0.1:${port}`
  await listening(origin)
  const slow = rawRequest(origin, '/slow?ms=20000', { headers: { accept: 'application/json' } }).then(
    () => 'answered',
    () => 'cut',
  )
  await new Promise((r) => setTimeout(r, 200))
  const signalled = Date.now()
  proc.kill('SIGTERM')
  const run = await proc.done
  const took = Date.now() - signalled
  t.equal(run.code, 0, run.stderr)
  t.ok(took < 10_000, `exited after the bound, not after the request (${took} ms)`)
  t.equal(await slow, 'cut', 'the request beyond the bound was cut')
})

t.test('a redis store without its URL, and a management port equal to the public one, are refused by check and run alike, naming the key', async (t) => {
  const config = valid(8080, 'http://127.0.0.1:3000')
  const path = configFile({
    ...config,
    server: { ...config.server, managementPort: 8080 },
    session: { store: 'redis' },
  })
  for (const command of [['check'], []]) {
    const run = await cli([...command, '--config', path], { CLI_SECRET: SECRET, CLI_COOKIE: COOKIE }).done
    t.equal(run.code, 2, `${command[0] ?? 'run'} exits 2`)
    t.match(run.stderr, /server\.managementPort: must differ from server\.port/)
    t.match(run.stderr, /session\.store: redis requires session\.redisUrl/)
  }
})

t.test('jwks prints the public JWKS of provider.clientKey (from the environment), exit 0; without a key exit 2', async (t) => {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
  const config = valid(8080, 'http://127.0.0.1:3000')
  const path = configFile({
    ...config,
    provider: { ...config.provider, clientSecret: undefined, clientAuthMethod: 'private_key_jwt', clientKey: '${CLI_KEY}', clientKeyId: 'gw-1' },
  })
  const run = await cli(['jwks', '--config', path], { CLI_KEY: pem, CLI_COOKIE: COOKIE }).done
  t.equal(run.code, 0, run.stderr)
  const jwks = JSON.parse(run.stdout) as { keys: Array<Record<string, string>> }
  const expected = createPublicKey(privateKey).export({ format: 'jwk' })
  t.strictSame(jwks, { keys: [{ ...expected, kid: 'gw-1', use: 'sig' }] }, 'the public half only, with its kid')
  const secretOnly = await cli(['jwks', '--config', configFile(config)], { CLI_SECRET: SECRET, CLI_COOKIE: COOKIE }).done
  t.equal(secretOnly.code, 2)
  t.match(secretOnly.stderr, /provider\.clientKey is not set/)
})

/** Polls `check` every 100 ms for up to `ms`; true once it holds. */
async function eventually(check: () => Promise<boolean>, ms = 8000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    if (await check().catch(() => false)) return true
    await new Promise((r) => setTimeout(r, 100))
  }
  return false
}

t.test('SIGHUP reloads the file: /config shows its hash and load time, the metric counts; an invalid file is refused by key and changes nothing', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const [port, managementPort] = (await freePorts(2)) as [number, number]
  const base = valid(port, upstream.url, managementPort)
  // An unreachable provider, quickly given up on: the reload does not wait long for it.
  const config = { ...base, provider: { ...base.provider, timeoutMs: 200 }, upstreams: [{ name: 'app', target: upstream.url, auth: 'required' }], log: { level: 'info' } }
  const path = configFile(config)
  const proc = cli(['--config', path], { CLI_SECRET: SECRET, CLI_COOKIE: COOKIE })
  t.teardown(() => proc.kill('SIGKILL'))
  const origin = `http://127.0.0.1:${port}`
  const management = `http://127.0.0.1:${managementPort}`
  await listening(management)
  const first = (await rawRequest(management, '/config')).json() as { hash: string; loadedAt: string }
  t.equal(first.hash, `sha256:${createHash('sha256').update(readFileSync(path)).digest('hex')}`, 'the hash of the file as read')
  t.equal((await rawRequest(origin, '/x', { headers: { accept: 'application/json' } })).status, 401, 'auth: required')

  writeFileSync(path, stringify({ ...config, upstreams: [{ name: 'app', target: upstream.url, auth: 'none' }] }))
  proc.kill('SIGHUP')
  t.ok(await eventually(async () => ((await rawRequest(management, '/config')).json() as { hash: string }).hash !== first.hash), 'a new hash')
  const second = (await rawRequest(management, '/config')).json() as { hash: string; loadedAt: string }
  t.equal(second.hash, `sha256:${createHash('sha256').update(readFileSync(path)).digest('hex')}`)
  t.ok(Date.parse(second.loadedAt) > Date.parse(first.loadedAt), 'a later load time')
  t.equal((await rawRequest(origin, '/x', { headers: { accept: 'application/json' } })).status, 200, 'the new rules: auth: none')
  const metrics = (await rawRequest(management, '/metrics')).body
  t.match(metrics, /openid_gateway_config_reloads_total\{outcome="success"\} 1/)
  t.match(metrics, new RegExp(`openid_gateway_config_info\\{hash="${second.hash}"\\} 1`))

  writeFileSync(path, stringify({ ...config, upstreams: [{ name: 'app', target: 'not a url' }], cookies: { secrets: ['short'], secure: false } }))
  proc.kill('SIGHUP')
  t.ok(await eventually(async () => /openid_gateway_config_reloads_total\{outcome="failure"\} 1/.test((await rawRequest(management, '/metrics')).body)), 'counted as a failure')
  t.same((await rawRequest(management, '/config')).json(), second, 'the running configuration is kept')
  t.equal((await rawRequest(origin, '/x', { headers: { accept: 'application/json' } })).status, 200, 'and still serves')
  proc.kill('SIGTERM')
  const run = await proc.done
  const problems = run.stdout.split('\n').filter((l) => l.includes('"configuration problem"')).map((l) => (JSON.parse(l) as { problem: string }).problem)
  t.match(problems, [/^cookies\.secrets\[0\]: /, /^upstreams\[0\]\.target: /], 'each problem logged by key')
  t.notMatch(run.stdout, /short/, 'never the secret it refused')
})

t.test('server.watchConfig: a change of the file reloads it without a signal', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const port = await freePort()
  const base = valid(port, upstream.url)
  const config = { ...base, server: { ...base.server, watchConfig: true }, provider: { ...base.provider, timeoutMs: 200 }, upstreams: [{ name: 'app', target: upstream.url }] }
  const path = configFile(config)
  const proc = cli(['--config', path], { CLI_SECRET: SECRET, CLI_COOKIE: COOKIE })
  t.teardown(() => proc.kill('SIGKILL'))
  const origin = `http://127.0.0.1:${port}`
  await eventually(async () => (await rawRequest(origin, '/x')).status > 0)
  t.equal((await rawRequest(origin, '/x', { headers: { accept: 'application/json' } })).status, 401)
  writeFileSync(path, stringify({ ...config, upstreams: [{ name: 'app', target: upstream.url, auth: 'none' }] }))
  t.ok(await eventually(async () => (await rawRequest(origin, '/x', { headers: { accept: 'application/json' } })).status === 200), 'the new rules apply')
  proc.kill('SIGTERM')
  t.equal((await proc.done).code, 0)
})

/**
 * Serves `text` on the FIFO at `path` to every reader until `stop` resolves: the gateway blocks
 * in its read of the file (startup is under way) until a writer comes. `onReader` runs when the
 * first reader is there, before anything is written.
 */
async function serveFifo(path: string, text: string, onReader: () => void, stop: Promise<unknown>): Promise<number> {
  let stopped = false
  void stop.then(() => (stopped = true))
  let readers = 0
  while (!stopped) {
    let fd: number | undefined
    try {
      // Non-blocking: ENXIO while no process has the FIFO open for reading.
      fd = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK)
    } catch {
      await new Promise((r) => setTimeout(r, 5))
      continue
    }
    if (readers++ === 0) onReader()
    // A pipe holds 64 KiB: the whole file goes in one write.
    writeSync(fd, text)
    closeSync(fd)
    // The reader sees the end of the file and closes; wait until it has, before looking again.
    await new Promise((r) => setTimeout(r, 20))
  }
  return readers
}

t.test('SIGHUP during startup (issue 16, point 12): remembered, not fatal; the reload runs once the gateway is up', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const port = await freePort()
  const base = valid(port, upstream.url)
  const dir = mkdtempSync(join(tmpdir(), 'ogw-fifo-'))
  const path = join(dir, 'gateway.yaml')
  execFileSync('mkfifo', [path])
  const proc = cli(['--config', path], { CLI_SECRET: SECRET, CLI_COOKIE: COOKIE })
  t.teardown(() => proc.kill('SIGKILL'))
  // The first read of the file happens after every module is loaded (cli.ts imports hangups.ts
  // first) and before the first app exists: the moment a rollout's ConfigMap update can come.
  const reloaded = new Promise<void>((resolve) => {
    const poll = setInterval(() => {
      if (proc.stdout().includes('"configuration reloaded"')) {
        clearInterval(poll)
        resolve()
      }
    }, 20)
    void proc.done.then(() => {
      clearInterval(poll)
      resolve()
    })
  })
  const config = { ...base, provider: { ...base.provider, timeoutMs: 200 }, log: { level: 'info' } }
  const readers = await serveFifo(path, stringify(config), () => proc.kill('SIGHUP'), reloaded)
  t.ok(readers >= 2, 'the file was read at startup and again for the reload')
  const lines = proc.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; trigger?: string })
  t.ok(lines.some((l) => l.msg === 'listening'), 'the gateway started')
  t.ok(lines.some((l) => l.msg === 'configuration reloaded' && l.trigger === 'SIGHUP'), 'and then ran the reload the early SIGHUP asked for')
  proc.kill('SIGTERM')
  const run = await proc.done
  t.equal(run.code, 0, 'it ran until told to stop')
})

t.test('server.managementHost: the management listener binds it, not server.host (issue 16)', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const [port, managementPort] = (await freePorts(2)) as [number, number]
  const base = valid(port, upstream.url, managementPort)
  // Another loopback address: reachable there, and not on server.host.
  const path = configFile({ ...base, server: { ...base.server, managementHost: '127.0.0.2' }, provider: { ...base.provider, timeoutMs: 200 } })
  const proc = cli(['--config', path], { CLI_SECRET: SECRET, CLI_COOKIE: COOKIE })
  t.teardown(() => proc.kill('SIGKILL'))
  await listening(`http://127.0.0.2:${managementPort}`)
  t.equal((await rawRequest(`http://127.0.0.2:${managementPort}`, '/healthz')).status, 200, 'on server.managementHost')
  await t.rejects(rawRequest(`http://127.0.0.1:${managementPort}`, '/healthz'), 'not on server.host')
  proc.kill('SIGTERM')
  t.equal((await proc.done).code, 0)
})
