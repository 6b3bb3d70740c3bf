import { cli, until } from '../fixtures/cli.ts'
import { recipe } from '../fixtures/markdown.ts'
import { generateKeyPairSync } from 'node:crypto'
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { stringify } from 'yaml'
import { describeExposure, exposedSecretFiles, isReadableByOthers } from '#src/config/file-modes'
import { parseConfig } from '#src/config/load'
import { STARTUP_SUMMARY_MESSAGE } from '#src/config/summary'
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

t.test("a Google service account's key file readable by others is named by its key", async (t) => {
  const rsaPem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()
  const write = (name: string, mode: number): string => {
    const path = join(dir, name)
    writeFileSync(path, JSON.stringify({ type: 'service_account', client_email: 'sa@p.iam.gserviceaccount.com', private_key_id: 'k1', private_key: rsaPem }))
    chmodSync(path, mode)
    return path
  }
  const withKey = (path: string) => ({ claimSources: { googleGroups: { adminEmail: 'admin@example.com', serviceAccountKeyFile: path } } })
  t.strictSame(exposed(configFile('google-open.yaml', base(1, { provider: withKey(write('sa-open.json', 0o644)) }), 0o600)), [
    ['provider.claimSources.googleGroups.serviceAccountKeyFile', '0644'],
  ])
  t.strictSame(exposed(configFile('google-closed.yaml', base(1, { provider: withKey(write('sa-closed.json', 0o400)) }), 0o600)), [])
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

t.test('the secrets written in a configuration file are named by key, each secret the effective configuration masks', async (t) => {
  const written = (name: string, extra: Record<string, unknown>): string[] | undefined => {
    const path = configFile(name, { ...base(1), ...extra }, 0o644)
    return exposedSecretFiles(parseConfig(readFileSync(path, 'utf8'), env, path), path).find((f) => f.key === '(configuration file)')?.secrets
  }
  const provider = base(1).provider
  t.strictSame(written('none.yaml', {}), undefined, 'secrets only through ${VAR}: nothing to say')
  t.strictSame(written('client.yaml', { provider: { ...provider, clientSecret: 'a-client-secret-written-in' } }), ['provider.clientSecret'])
  t.strictSame(written('default.yaml', { provider: { ...provider, clientSecret: '${UNSET_SECRET:-a-default-in-the-file}' } }), ['provider.clientSecret'], "a ${VAR:-default}'s default is written in the file")
  t.strictSame(
    written('ssf.yaml', { provider: { ...provider, ssf: { delivery: 'push', authorization: 'Bearer push-secret-written-in', bearerToken: 'transmitter-token-written-in' } } }),
    ['provider.ssf.authorization', 'provider.ssf.bearerToken'],
    "the Shared Signals receiver's credentials",
  )
  t.strictSame(
    written('several.yaml', { provider: undefined, providers: [{ ...provider, name: 'staff' }, { ...provider, name: 'partners', issuer: 'http://127.0.0.2:9', clientSecret: 'partners-secret-written-in' }], upstreams: [{ name: 'app', target: 'http://127.0.0.1:9', auth: 'none', providers: ['*'] }] }),
    ['providers[1].clientSecret'],
  )
  t.strictSame(written('redis-user.yaml', { session: { store: 'redis', redisUrl: 'redis://lone-user-is-password@127.0.0.1:6379' } }), ['session.redisUrl'], "a Redis URL's lone user name, which clients read as the password")
  t.strictSame(written('redis-param.yaml', { session: { store: 'redis', redisUrl: 'redis://127.0.0.1:6379/0?password=query-secret' } }), ['session.redisUrl'], 'a password query parameter')
  t.strictSame(written('redis-plain.yaml', { session: { store: 'redis', redisUrl: 'redis://127.0.0.1:6379/0' } }), undefined, 'a Redis URL without credentials')
})

t.test('check warns on stderr and run in its log about a configuration file with secrets written in it; a 0600 file gets no warning', async (t) => {
  const literal = 'a-client-secret-written-in-the-file'
  const port = await freePort()
  const file = (name: string, mode: number): string => configFile(name, base(port, { provider: { clientSecret: literal }, cookieSecret: COOKIE_SECRET }), mode)
  const open = file('cli-literal-open.yaml', 0o644)
  const closed = file('cli-literal-closed.yaml', 0o600)
  // The warning docs/configuration.md shows, for this file.
  const warning = `${recipe('docs/configuration.md', 'text').replace('gateway.yaml', open)}`
  t.match(warning, /^warning: the configuration file .* holds secrets written in it \(provider\.clientSecret, cookies\.secrets\[0\]\) and is readable by group or others \(mode 0644\)/)

  const check = await cli(['check', '--config', open], env).done
  t.equal(check.code, 0, 'a warning, not a refusal')
  t.equal(check.stderr, warning, 'the one warning on stderr, naming the key')
  t.notMatch(check.stderr, literal, 'never the secret')
  t.notMatch(check.stderr, COOKIE_SECRET)
  const quiet = await cli(['check', '--config', closed], env).done
  t.equal(quiet.code, 0)
  t.equal(quiet.stderr, '', 'no warning for a file only its owner reads')

  const logged = async (path: string): Promise<Array<Record<string, unknown>>> => {
    const run = cli(['run', '--config', path], env)
    t.teardown(() => run.kill('SIGTERM'))
    // The startup summary is logged after the warnings: once it is there, every warning is too.
    const lines = (): Array<Record<string, unknown>> =>
      run
        .stdout()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
    t.ok(await until(run, async () => lines().some((l) => l.msg === STARTUP_SUMMARY_MESSAGE)), 'run logged its startup summary')
    run.kill('SIGTERM')
    await run.done
    return lines()
  }
  const openLines = await logged(open)
  const line = openLines.find((l) => l.key === '(configuration file)')
  t.ok(line, 'run logs it')
  t.equal(line?.level, 40, 'at warn')
  t.equal(line?.mode, '0644')
  t.equal(line?.msg, warning.slice('warning: '.length, -1))
  t.notMatch(JSON.stringify(openLines), literal, 'never the secret')
  t.notMatch(JSON.stringify(openLines), COOKIE_SECRET)
  const closedLines = await logged(closed)
  t.notOk(
    closedLines.some((l) => l.key === '(configuration file)' || String(l.msg).includes('readable by group or others')),
    'and no warning for a 0600 file',
  )
})
