import t from 'tap'
import { createPublicKey, generateKeyPairSync } from 'node:crypto'
import { rawRequest } from './fixtures/http.ts'
import { eventually } from './fixtures/poll.ts'
import { cli, configFile, COOKIE, SECRET, SECRETS_ENV, until, valid } from './fixtures/cli.ts'
import { freePort, freePorts } from './fixtures/stack.ts'
import { startEchoUpstream } from './fixtures/upstream.ts'
import { readFileSync } from 'node:fs'
import { parse } from 'yaml'
import { MANAGEMENT_HOST_ENV } from '#src/config/normalize'

t.test('check ends with one OK line naming the file it checked, exit 0; nothing else on stdout', async (t) => {
  const path = configFile(valid(8080, 'http://127.0.0.1:3000'))
  const run = await cli(['check', '--config', path], SECRETS_ENV).done
  t.equal(run.code, 0, run.stderr)
  t.strictSame(run.stdout.split('\n'), [`OK: ${path} is a valid configuration (1 provider, 1 upstream; offline: --online also asks the providers)`, ''])
})

t.test('check without --config names the default file it checked, valid or not', async (t) => {
  const env = { PUBLIC_URL: 'https://gw.example.test', OIDC_ISSUER: 'https://id.example.test', OIDC_CLIENT_SECRET: SECRET, COOKIE_SECRET: COOKIE }
  const run = await cli(['check'], env).done
  t.equal(run.code, 0, run.stderr)
  t.match(run.stdout, /^OK: config\/gateway\.yaml is a valid configuration/)
  const invalid = await cli(['check'], { ...env, PUBLIC_URL: 'not a url' }).done
  t.equal(invalid.code, 2)
  t.match(invalid.stderr, /server\.publicUrl/)
  t.match(invalid.stderr, /FAILED: config\/gateway\.yaml is not a valid configuration\n$/)
})

t.test('check --print-config prints the effective configuration with secrets masked on stdout, the verdict on stderr, exit 0', async (t) => {
  const path = configFile(valid(8080, 'http://127.0.0.1:3000'))
  const run = await cli(['check', '--print-config', '--config', path], SECRETS_ENV).done
  t.equal(run.code, 0, run.stderr)
  t.match(parse(run.stdout), { provider: undefined, providers: [{ clientId: 'gw', clientSecret: '********' }] }, 'stdout is YAML alone')
  t.notMatch(run.stdout, SECRET)
  t.notMatch(run.stdout, COOKIE)
  t.match(run.stdout, /timeoutMs: 10000/, 'defaults are shown')
  t.match(run.stderr, new RegExp(`^OK: ${path} is a valid configuration`))
})

t.test('--help prints the commands, options and environment variables the CLI reads; --version the package version', async (t) => {
  const help = await cli(['--help']).done
  t.equal(help.code, 0)
  for (const word of ['run', 'check', 'jwks', '--config', '--online', '--print-config', '--provider', '--version', MANAGEMENT_HOST_ENV, '${NAME}'])
    t.match(help.stdout, word)
  const version = await cli(['--version']).done
  t.equal(version.code, 0, version.stderr)
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
  t.equal(version.stdout, `openid-gateway ${pkg.version}\n`)
  const misplaced = await cli(['run', '--online']).done
  t.equal(misplaced.code, 2, '--online belongs to check')
})

t.test('an invalid file exits 2 naming the key path, before listening', async (t) => {
  const config = valid(8080, 'not-a-url')
  const path = configFile(config)
  for (const command of [['check'], []]) {
    const run = await cli([...command, '--config', path], SECRETS_ENV).done
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

t.test('run serves, with its management listener; SIGTERM: /readyz 503 at once, in-flight requests finish, a final line, exit 0', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const [port, managementPort] = (await freePorts(2)) as [number, number]
  const path = configFile({ ...valid(port, upstream.url, managementPort), log: { level: 'info' } })
  const proc = cli(['--config', path], SECRETS_ENV)
  const origin = `http://127.0.0.1:${port}`
  const management = `http://127.0.0.1:${managementPort}`
  t.ok(await until(proc, async () => (await rawRequest(management, '/healthz')).status === 200), 'listening', { stderr: proc.stdout() })
  t.equal((await rawRequest(management, '/healthz')).status, 200, 'the management listener answers')
  t.equal((await rawRequest(origin, '/healthz')).status, 200, 'the public port proxies /healthz to the upstream (auth: none)')
  t.notMatch((await rawRequest(origin, '/metrics')).body, /openid_gateway_/, 'metrics are not served on the public port')

  const inFlight = rawRequest(origin, '/slow?ms=800', { headers: { accept: 'application/json' } })
  await eventually('the slow request reaches the upstream', () => upstream.requests.some((r) => r.url.startsWith('/slow')))
  proc.kill('SIGTERM')
  // The signal is handled when the process gets to it. (Not ready before it too: the provider of
  // `valid` never answers.)
  const ready = await eventually('/readyz says draining', async () => {
    const res = await rawRequest(management, '/readyz')
    return (res.json() as { status?: string }).status === 'draining' ? res : undefined
  })
  t.equal(ready.status, 503, 'while draining, /readyz says not ready')
  const res = await inFlight
  t.equal(res.status, 200, 'the in-flight request completed')
  const run = await proc.done
  t.equal(run.code, 0, run.stderr)
  // The last line logged (by its time: a line of the drained request may leave the stdout pipe's
  // buffer after it) says it stopped.
  const lines = run.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { msg?: string; signal?: string; time: number })
  const stopped = lines.find((line) => line.msg === 'stopped')
  t.match(stopped, { signal: 'SIGTERM' }, 'a line says it stopped', { tail: run.stdout.slice(-600) })
  t.notOk(
    lines.some((line) => line.time > (stopped?.time ?? 0)),
    'and nothing was logged after it',
  )
  await t.rejects(rawRequest(origin, '/status/204'), 'no longer listening')
  await t.rejects(rawRequest(management, '/healthz'), 'nor the management listener')
})

t.test('SIGTERM: every request line logged before it is on stdout after the exit (the log buffer is written at exit)', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const port = await freePort()
  const path = configFile({ ...valid(port, upstream.url), log: { level: 'info' } })
  const proc = cli(['--config', path], SECRETS_ENV)
  const origin = `http://127.0.0.1:${port}`
  t.ok(await until(proc, async () => (await rawRequest(origin, '/healthz')).status > 0), 'listening')
  // More than one batch of lines (bufferedDestination writes about 3 KiB at a time), so that the
  // last ones are still buffered when the signal comes: the periodic write is a second away.
  const count = 40
  for (let n = 0; n < count; n++) t.equal((await rawRequest(origin, `/status/204?n=${n}`)).status, 204)
  proc.kill('SIGTERM')
  const run = await proc.done
  t.equal(run.code, 0, run.stderr)
  const logged = run.stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { msg?: string; url?: string })
    .filter((line) => line.msg === 'request' && line.url?.startsWith('/status/204?n='))
  t.same(
    logged.map((line) => line.url),
    Array.from({ length: count }, (_, n) => `/status/204?n=${n}`),
    'all of them, in order',
  )
})

t.test('SIGTERM: a request longer than server.shutdownTimeoutMs does not hold the exit', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const port = await freePort()
  const config = valid(port, upstream.url)
  const path = configFile({ ...config, server: { ...config.server, shutdownTimeoutMs: 500 } })
  const proc = cli(['--config', path], SECRETS_ENV)
  const origin = `http://127.0.0.1:${port}`
  t.ok(await until(proc, async () => (await rawRequest(origin, '/healthz')).status > 0), 'listening')
  const slow = rawRequest(origin, '/slow?ms=20000', { headers: { accept: 'application/json' } }).then(
    () => 'answered',
    () => 'cut',
  )
  await eventually('the slow request reaches the upstream', () => upstream.requests.some((r) => r.url.startsWith('/slow')))
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
    const run = await cli([...command, '--config', path], SECRETS_ENV).done
    t.equal(run.code, 2, `${command[0] ?? 'run'} exits 2`)
    t.match(run.stderr, /server\.managementPort: must differ from server\.port/)
    t.match(run.stderr, /session\.store: redis requires session\.redisUrl, session\.redis\.sentinels or session\.redis\.cluster/)
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
  const secretOnly = await cli(['jwks', '--config', configFile(config)], SECRETS_ENV).done
  t.equal(secretOnly.code, 2)
  t.match(secretOnly.stderr, /provider\.clientKey is not set/)
})

t.test('a key under its former name: check prints a warning naming the new one and passes; run logs it as a warning', async (t) => {
  const [port, managementPort] = (await freePorts(2)) as [number, number]
  const config = valid(port, 'http://127.0.0.1:3000', managementPort)
  const path = configFile({ ...config, forwardAuth: { extAuthzPath: '/api/v1/openid/envoy' } })
  const checked = await cli(['check', '--config', path], SECRETS_ENV).done
  t.equal(checked.code, 0, checked.stderr)
  t.match(checked.stderr, /^warning: forwardAuth\.extAuthzPath: .*envoy\.pathPrefix/m, 'check names the new key')
  const proc = cli(['--config', path], SECRETS_ENV)
  t.teardown(() => proc.kill('SIGKILL'))
  const warned = () =>
    proc
      .stdout()
      .split('\n')
      .some((line) => /"level":40/.test(line) && /forwardAuth\.extAuthzPath: .*envoy\.pathPrefix/.test(line))
  t.ok(await until(proc, async () => warned()), 'run logs the warning naming the new key', { stdout: proc.stdout() })
})
