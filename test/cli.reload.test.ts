import t from 'tap'
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { closeSync, constants, existsSync, mkdtempSync, openSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { cli, configFile, SECRETS_ENV, until, valid } from './fixtures/cli.ts'
import { checkRequest, grpcClient } from './fixtures/ext-authz-grpc.ts'
import { rawRequest } from './fixtures/http.ts'
import { eventually } from './fixtures/poll.ts'
import { freePort, freePorts } from './fixtures/stack.ts'
import { startEchoUpstream } from './fixtures/upstream.ts'

// The running CLI changing its configuration (SIGHUP, server.watchConfig, a SIGHUP during
// startup) and where it listens (server.managementHost). Apart from test/cli.test.ts so that each
// file's processes fit tap's per-file timeout on a loaded machine.

t.test('SIGHUP reloads the file: /config shows its hash and load time, the metric counts; an invalid file is refused by key and changes nothing', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const [port, managementPort] = (await freePorts(2)) as [number, number]
  const base = valid(port, upstream.url, managementPort)
  // An unreachable provider, quickly given up on: the reload does not wait long for it.
  const config = {
    ...base,
    provider: { ...base.provider, timeoutMs: 200 },
    upstreams: [{ name: 'app', target: upstream.url, auth: 'required' }],
    log: { level: 'info' },
  }
  const path = configFile(config)
  const proc = cli(['--config', path], SECRETS_ENV)
  t.teardown(() => proc.kill('SIGKILL'))
  const origin = `http://127.0.0.1:${port}`
  const management = `http://127.0.0.1:${managementPort}`
  t.ok(await until(proc, async () => (await rawRequest(management, '/healthz')).status === 200), 'listening')
  const first = (await rawRequest(management, '/config')).json() as { hash: string; loadedAt: string }
  t.equal(first.hash, `sha256:${createHash('sha256').update(readFileSync(path)).digest('hex')}`, 'the hash of the file as read')
  t.equal((await rawRequest(origin, '/x', { headers: { accept: 'application/json' } })).status, 401, 'auth: required')

  writeFileSync(path, stringify({ ...config, upstreams: [{ name: 'app', target: upstream.url, auth: 'none' }] }))
  proc.kill('SIGHUP')
  t.ok(await until(proc, async () => ((await rawRequest(management, '/config')).json() as { hash: string }).hash !== first.hash), 'a new hash')
  const second = (await rawRequest(management, '/config')).json() as { hash: string; loadedAt: string }
  t.equal(second.hash, `sha256:${createHash('sha256').update(readFileSync(path)).digest('hex')}`)
  t.ok(Date.parse(second.loadedAt) > Date.parse(first.loadedAt), 'a later load time')
  t.equal((await rawRequest(origin, '/x', { headers: { accept: 'application/json' } })).status, 200, 'the new rules: auth: none')
  const metrics = (await rawRequest(management, '/metrics')).body
  t.match(metrics, /openid_gateway_config_reloads_total\{outcome="success"\} 1/)
  t.match(metrics, new RegExp(`openid_gateway_config_info\\{hash="${second.hash}"\\} 1`))

  writeFileSync(path, stringify({ ...config, upstreams: [{ name: 'app', target: 'not a url' }], cookies: { secrets: ['short'], secure: false } }))
  proc.kill('SIGHUP')
  t.ok(
    await until(proc, async () => /openid_gateway_config_reloads_total\{outcome="failure"\} 1/.test((await rawRequest(management, '/metrics')).body)),
    'counted as a failure',
  )
  t.same((await rawRequest(management, '/config')).json(), second, 'the running configuration is kept')
  t.equal((await rawRequest(origin, '/x', { headers: { accept: 'application/json' } })).status, 200, 'and still serves')
  proc.kill('SIGTERM')
  const run = await proc.done
  const problems = run.stdout
    .split('\n')
    .filter((l) => l.includes('"configuration problem"'))
    .map((l) => (JSON.parse(l) as { problem: string }).problem)
  t.match(problems, [/^cookies\.secrets\[0\]: /, /^upstreams\[0\]\.target: /], 'each problem logged by key')
  t.notMatch(run.stdout, /short/, 'never the secret it refused')
})

t.test('server.watchConfig: a change of the file reloads it without a signal', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const port = await freePort()
  const base = valid(port, upstream.url)
  // A change that removes no access rule is loaded after two looks (one that removes some waits
  // for the file to stay unchanged longer: test/runtime/live.config-watcher-loosening.test.ts).
  const config = {
    ...base,
    server: { ...base.server, watchConfig: true },
    provider: { ...base.provider, timeoutMs: 200 },
    upstreams: [{ name: 'app', target: upstream.url, auth: 'none' }],
  }
  const path = configFile(config)
  const proc = cli(['--config', path], SECRETS_ENV)
  t.teardown(() => proc.kill('SIGKILL'))
  const origin = `http://127.0.0.1:${port}`
  t.ok(await until(proc, async () => (await rawRequest(origin, '/x')).status > 0), 'listening')
  t.equal((await rawRequest(origin, '/x', { headers: { accept: 'application/json' } })).status, 200)
  writeFileSync(path, stringify({ ...config, upstreams: [{ name: 'app', target: upstream.url, auth: 'required' }] }))
  t.ok(await until(proc, async () => (await rawRequest(origin, '/x', { headers: { accept: 'application/json' } })).status === 401), 'the new rules apply')
  proc.kill('SIGTERM')
  t.equal((await proc.done).code, 0)
})

/** Whether process `pid` has `path` open (Linux: its descriptors in /proc). */
function hasOpen(pid: number, path: string): boolean {
  const fds = `/proc/${pid}/fd`
  if (!existsSync(fds)) return false
  return readdirSync(fds).some((fd) => {
    try {
      return readlinkSync(join(fds, fd)) === path
    } catch {
      return false
    }
  })
}

/**
 * Serves `text` on the FIFO at `path` to every reader until `stop` resolves: the gateway (process
 * `pid`) blocks in its read of the file (startup is under way) until a writer comes. `onReader`
 * runs when the first reader is there, before anything is written.
 */
async function serveFifo(path: string, pid: number, text: string, onReader: () => void, stop: Promise<unknown>): Promise<number> {
  // Opening a FIFO to write waits for a reader (in libuv's thread pool: the event loop runs on).
  // Once stopped, a reader of the test's own holds it open, so that an open under way returns.
  let unblock: number | undefined
  void stop.then(() => (unblock = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK)))
  let readers = 0
  try {
    for (;;) {
      const file = await open(path, 'w')
      if (unblock !== undefined) {
        await file.close()
        return readers
      }
      if (readers++ === 0) onReader()
      // A pipe holds 64 KiB: the whole file goes in one write.
      await file.write(text)
      await file.close()
      // The reader sees the end of the file and closes it; until it has, the next open would
      // write into the same read.
      await eventually('the gateway closes the file it read', () => !hasOpen(pid, path))
    }
  } finally {
    if (unblock !== undefined) closeSync(unblock)
  }
}

t.test('SIGHUP during startup: remembered, not fatal; the reload runs once the gateway is up', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const port = await freePort()
  const base = valid(port, upstream.url)
  const dir = mkdtempSync(join(tmpdir(), 'ogw-fifo-'))
  const path = join(dir, 'gateway.yaml')
  execFileSync('mkfifo', [path])
  const proc = cli(['--config', path], SECRETS_ENV)
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
  const readers = await serveFifo(path, proc.pid as number, stringify(config), () => proc.kill('SIGHUP'), reloaded)
  t.ok(readers >= 2, 'the file was read at startup and again for the reload')
  const lines = proc
    .stdout()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; trigger?: string })
  t.ok(
    lines.some((l) => l.msg === 'listening'),
    'the gateway started',
  )
  t.ok(
    lines.some((l) => l.msg === 'configuration reloaded' && l.trigger === 'SIGHUP'),
    'and then ran the reload the early SIGHUP asked for',
  )
  proc.kill('SIGTERM')
  const run = await proc.done
  t.equal(run.code, 0, 'it ran until told to stop')
})

t.test('server.managementHost: the management listener binds it, not server.host', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const [port, managementPort] = (await freePorts(2)) as [number, number]
  const base = valid(port, upstream.url, managementPort)
  // Another loopback address: reachable there, and not on server.host.
  const path = configFile({ ...base, server: { ...base.server, managementHost: '127.0.0.2' }, provider: { ...base.provider, timeoutMs: 200 } })
  const proc = cli(['--config', path], SECRETS_ENV)
  t.teardown(() => proc.kill('SIGKILL'))
  t.ok(await until(proc, async () => (await rawRequest(`http://127.0.0.2:${managementPort}`, '/healthz')).status === 200), 'listening')
  t.equal((await rawRequest(`http://127.0.0.2:${managementPort}`, '/healthz')).status, 200, 'on server.managementHost')
  await t.rejects(rawRequest(`http://127.0.0.1:${managementPort}`, '/healthz'), 'not on server.host')
  proc.kill('SIGTERM')
  t.equal((await proc.done).code, 0)
})

t.test('server.extAuthzGrpcPort: run serves the ext_authz gRPC service and its health, and stops it on SIGTERM', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const [port, grpcPort] = (await freePorts(2)) as [number, number]
  const base = valid(port, upstream.url)
  const path = configFile({ ...base, server: { ...base.server, extAuthzGrpcPort: grpcPort }, provider: { ...base.provider, timeoutMs: 200 } })
  const proc = cli(['--config', path], SECRETS_ENV)
  t.teardown(() => proc.kill('SIGKILL'))
  const client = grpcClient(`127.0.0.1:${grpcPort}`)
  t.teardown(() => client.close())
  t.ok(await until(proc, async () => (await client.health()) !== undefined), 'the health service answers')
  t.equal(await client.health(), 'NOT_SERVING', 'the provider never answers: not ready')
  const res = await client.check(checkRequest({ method: 'GET', host: `127.0.0.1:${port}`, path: '/x', scheme: 'http', headers: {} }))
  t.equal(res.status?.code, 0, 'auth: none is decided without the provider')
  proc.kill('SIGTERM')
  t.equal((await proc.done).code, 0)
  await t.rejects(client.health(), 'no longer served')
})
