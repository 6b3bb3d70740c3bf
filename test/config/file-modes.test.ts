import { cli } from '../fixtures/cli.ts'
import { generateKeyPairSync } from 'node:crypto'
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { stringify } from 'yaml'
import { describeExposure, exposedSecretFiles, isReadableByOthers } from '#src/config/file-modes'
import { parseConfig } from '#src/config/load'
import { COOKIE_SECRET, freePort } from '../fixtures/stack.ts'

// Key files and secret-holding configuration files readable by group or others are warned about
// by `check` and `run`, as ssh refuses such private keys.

const dir = mkdtempSync(join(tmpdir(), 'ogw-modes-'))
const pem = (): string => generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()

function keyFile(name: string, mode: number): string {
  const path = join(dir, name)
  writeFileSync(path, pem())
  chmodSync(path, mode)
  return path
}

function configFile(name: string, config: Record<string, unknown>, mode: number): string {
  const path = join(dir, name)
  writeFileSync(path, stringify(config))
  chmodSync(path, mode)
  return path
}

const base = (port: number, extra: { provider?: Record<string, unknown>; assertions?: Record<string, unknown>; cookieSecret?: string } = {}) => ({
  server: { host: '127.0.0.1', port, publicUrl: `http://127.0.0.1:${port}`, managementPort: 0 },
  provider: { issuer: 'http://127.0.0.1:9', clientId: 'gw', clientSecret: '${CLIENT_SECRET}', allowInsecureHttp: true, ...extra.provider },
  cookies: { secrets: [extra.cookieSecret ?? '${COOKIE}'], secure: false },
  ...(extra.assertions === undefined ? {} : { assertions: extra.assertions }),
  upstreams: [{ name: 'app', target: 'http://127.0.0.1:9', auth: 'none' }],
  log: { level: 'info' },
})
const env = { CLIENT_SECRET: 'a-client-secret-value', COOKIE: COOKIE_SECRET }

function exposed(path: string): Array<[string, string]> {
  return exposedSecretFiles(parseConfig(readFileSync(path, 'utf8'), env, path), path).map((f) => [f.key, f.mode])
}

t.test('group or world read permission is what counts', async (t) => {
  for (const mode of [0o400, 0o600, 0o700, 0o620]) t.notOk(isReadableByOthers(mode), mode.toString(8))
  for (const mode of [0o440, 0o640, 0o644, 0o604, 0o444]) t.ok(isReadableByOthers(mode), mode.toString(8))
})

t.test('key files readable by others are named by key; private ones are not', async (t) => {
  const open = keyFile('open.pem', 0o644)
  const group = keyFile('group.pem', 0o640)
  const closed = keyFile('closed.pem', 0o400)
  const jwt = { clientSecret: undefined, clientAuthMethod: 'private_key_jwt' }
  const one = configFile('one.yaml', base(1, { provider: { ...jwt, clientKey: open }, assertions: { signingKeys: [closed, group] } }), 0o600)
  t.strictSame(exposed(one), [
    ['provider.clientKey', '0644'],
    ['assertions.signingKeys[1]', '0640'],
  ])
  const fine = configFile('fine.yaml', base(1, { provider: { ...jwt, clientKey: closed }, assertions: { signingKeys: [closed] } }), 0o644)
  t.strictSame(exposed(fine), [], 'a configuration file without secrets of its own may be readable')
})

t.test('a configuration file that holds a secret itself is one of those files', async (t) => {
  const inline = configFile('inline.yaml', base(1, { cookieSecret: COOKIE_SECRET }), 0o644)
  t.strictSame(exposed(inline), [['(configuration file)', '0644']])
  const keyInline = configFile('key-inline.yaml', base(1, { provider: { clientSecret: undefined, clientAuthMethod: 'private_key_jwt', clientKey: pem() } }), 0o640)
  t.strictSame(exposed(keyInline), [['(configuration file)', '0640']])
  const private_ = configFile('private.yaml', base(1, { cookieSecret: COOKIE_SECRET }), 0o600)
  t.strictSame(exposed(private_), [])
  const [file] = exposedSecretFiles(parseConfig(stringify(base(1, { cookieSecret: COOKIE_SECRET })), env), inline)
  t.ok(file)
  if (file) t.notMatch(describeExposure(file), COOKIE_SECRET, 'the warning never quotes the secret')
})

t.test('check warns on stderr and run in its log, naming the key', async (t) => {
  const open = keyFile('cli-open.pem', 0o644)
  const path = configFile('cli.yaml', base(await freePort(), { provider: { clientSecret: undefined, clientAuthMethod: 'private_key_jwt', clientKey: open } }), 0o600)
  const check = await cli(['check', '--config', path], env).done
  t.equal(check.code, 0, 'check passes: a warning, not a refusal')
  t.match(check.stderr, `warning: provider.clientKey: the file ${open} is readable by group or others (mode 0644)`)
  const run = cli(['run', '--config', path], env)
  t.teardown(() => run.kill('SIGTERM'))
  const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setInterval(() => {
      const found = run
        .stdout()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.key === 'provider.clientKey')
      if (found) {
        clearInterval(timer)
        resolve(found)
      }
    }, 50)
    void run.done.then((r) => {
      clearInterval(timer)
      reject(new Error(`run ended: ${r.stderr}`))
    })
  })
  t.equal(line.level, 40, 'at warn')
  t.equal(line.mode, '0644')
  t.equal(line.path, open)
})
