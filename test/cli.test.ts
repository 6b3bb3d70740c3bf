import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { rawRequest } from './fixtures/http.js'
import { freePort } from './fixtures/stack.js'
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

const valid = (port: number, upstream: string) => ({
  server: { host: '127.0.0.1', port, publicUrl: `http://127.0.0.1:${port}` },
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

t.test('run serves, and SIGTERM drains in-flight requests and exits 0', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())
  const port = await freePort()
  const path = configFile(valid(port, upstream.url))
  const proc = cli(['--config', path], { CLI_SECRET: SECRET, CLI_COOKIE: COOKIE })
  const origin = `http://127.0.0.1:${port}`
  // Wait for the listener.
  for (let i = 0; i < 100; i++) {
    const up = await rawRequest(origin, '/status/204').then(() => true, () => false)
    if (up) break
    await new Promise((r) => setTimeout(r, 100))
  }
  const inFlight = rawRequest(origin, '/slow?ms=800', { headers: { accept: 'application/json' } })
  await new Promise((r) => setTimeout(r, 200))
  proc.kill('SIGTERM')
  const res = await inFlight
  t.equal(res.status, 200, 'the in-flight request completed')
  const run = await proc.done
  t.equal(run.code, 0, run.stderr)
  await t.rejects(rawRequest(origin, '/status/204'), 'no longer listening')
})

t.test('keys of features not built yet, and a redis store without its URL, are refused by check and run alike, naming the key', async (t) => {
  const config = valid(8080, 'http://127.0.0.1:3000')
  const path = configFile({
    ...config,
    server: { ...config.server, managementPort: 9091 },
    session: { store: 'redis' },
  })
  for (const command of [['check'], []]) {
    const run = await cli([...command, '--config', path], { CLI_SECRET: SECRET, CLI_COOKIE: COOKIE }).done
    t.equal(run.code, 2, `${command[0] ?? 'run'} exits 2`)
    t.match(run.stderr, /server\.managementPort: the management listener .* is not available/)
    t.match(run.stderr, /session\.store: redis requires session\.redisUrl/)
  }
})
