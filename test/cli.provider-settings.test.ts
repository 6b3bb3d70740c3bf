// What the command line says about the provider, against the real development provider
// (oidc-provider): `check --online` compares its discovery document and JWKS with the
// configuration, and `run` logs once at start what to register there. One provider serves every
// case: it takes client_secret_basic and private_key_jwt, not client_secret_post.

import t from 'tap'
import { rawRequest } from './fixtures/http.ts'
import { cli, configFile, COOKIE, SECRET, SECRETS_ENV, until, valid } from './fixtures/cli.ts'
import { startTestProvider } from './fixtures/provider.ts'
import { freePort } from './fixtures/stack.ts'
import { startupSummary, STARTUP_SUMMARY_MESSAGE } from '#src/config/summary'
import { resolveConfig } from '#src/config/load'

const port = await freePort()
const publicUrl = `http://127.0.0.1:${port}`
const provider = await startTestProvider(t, {
  clients: [{ clientId: 'gw', clientSecret: SECRET, redirectUris: [`${publicUrl}/api/v1/openid/callback`] }],
  clientAuthMethods: ['client_secret_basic', 'private_key_jwt'],
})
const { issuer } = provider

/** `valid` pointed at the provider, with `provider` merged into its provider section. */
function against(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const config = valid(port, 'http://127.0.0.1:9')
  return { ...config, provider: { ...config.provider, issuer, ...overrides } }
}

const online = (config: Record<string, unknown>) => cli(['check', '--online', '--config', configFile(config)], SECRETS_ENV).done

function lastLines(stdout: string, count: number): string[] {
  return stdout.trim().split('\n').slice(-count)
}

t.test('check --online: a configuration the provider supports lists what was compared, ends with an OK line per provider, exit 0', async (t) => {
  const run = await online(against())
  t.equal(run.code, 0, run.stderr + run.stdout)
  t.match(run.stdout, new RegExp(`ok +issuer: the provider names itself ${issuer}\\n`))
  t.match(run.stdout, /ok +client authentication: client_secret_basic \(token_endpoint_auth_methods_supported: client_secret_basic, private_key_jwt\)/)
  t.match(run.stdout, /ok +ID token signing: RS256 \(id_token_signing_alg_values_supported: [^)]*RS256/)
  t.match(run.stdout, /ok +PKCE: S256 \(code_challenge_methods_supported: S256\)/)
  t.match(run.stdout, /ok +PAR: not used/)
  t.match(run.stdout, new RegExp(`ok +end-session: sign-out continues at ${issuer}/`))
  t.match(run.stdout, new RegExp(`ok +back-channel logout: supported: register ${publicUrl}/api/v1/openid/backchannel-logout`))
  t.match(run.stdout, /ok +JWKS: [1-9]\d* keys? from http:\/\/127\.0\.0\.1:\d+\/jwks/)
  t.notMatch(run.stdout, /PROBLEM/)
  t.match(lastLines(run.stdout, 1)[0], new RegExp(`^OK: provider default: ${issuer} supports this configuration`))
  t.notMatch(run.stdout + run.stderr, SECRET, 'no secret is printed')
})

t.test('check --online: an issuer the provider does not name itself is a problem that shows the advertised one, exit 1', async (t) => {
  // The same server, reached by another name: discovery answers, but for another issuer.
  const wrong = issuer.replace('127.0.0.1', 'localhost')
  const run = await online(against({ issuer: wrong }))
  t.equal(run.code, 1, run.stderr)
  t.match(run.stdout, new RegExp(`PROBLEM issuer: the provider names itself ${issuer}, not ${wrong}`))
  t.match(lastLines(run.stdout, 1)[0], /^PROBLEM: provider default: issuer$/)
  t.equal((await cli(['check', '--config', configFile(against({ issuer: wrong }))], SECRETS_ENV).done).code, 0, 'offline, the same file passes')
})

t.test('check --online: https to a provider that speaks http is a problem naming the failed discovery, exit 1', async (t) => {
  const https = issuer.replace('http:', 'https:')
  const run = await online(against({ issuer: https, allowInsecureHttp: false }))
  t.equal(run.code, 1, run.stderr)
  // The TLS handshake meets plain http: the transport's words (an ERR_SSL_ code) or the gateway's own about TLS.
  t.match(run.stdout, new RegExp(`PROBLEM discovery: ${https}/\\.well-known/openid-configuration .*(ERR_SSL_|TLS)`))
  t.match(lastLines(run.stdout, 1)[0], /^PROBLEM: provider default: discovery$/)
})

t.test('check --online: a client authentication method the provider does not take is a problem; one line per provider, exit 1', async (t) => {
  // Two providers need two issuers: a second provider, which takes client_secret_post alone.
  const other = await startTestProvider(t, {
    clients: [{ clientId: 'gw', clientSecret: SECRET, redirectUris: [`${publicUrl}/api/v1/openid/callback/post`] }],
    clientAuthMethods: ['client_secret_post'],
  })
  const { provider: base, ...rest } = valid(port, 'http://127.0.0.1:9')
  const good = { ...base, name: 'good', issuer }
  const basic = { ...base, name: 'basic', issuer: other.issuer }
  const path = configFile({ ...rest, providers: [good, basic], upstreams: [{ ...rest.upstreams[0], providers: ['good', 'basic'] }] })
  const run = await cli(['check', '--online', '--config', path], SECRETS_ENV).done
  t.equal(run.code, 1, run.stderr)
  t.match(
    run.stdout,
    /PROBLEM client authentication: provider\.clientAuthMethod client_secret_basic is not supported \(token_endpoint_auth_methods_supported: client_secret_post\)/,
  )
  t.strictSame(lastLines(run.stdout, 2), [
    `OK: provider good: ${issuer} supports this configuration (${path})`,
    'PROBLEM: provider basic: client authentication',
  ])
  t.equal(run.stdout.match(/ok +JWKS: /g)?.length, 2, 'each provider is compared in full')
})

t.test('run logs once, per provider, the redirect URI it sends, the client authentication, scopes, cookie, store and upstreams; never a secret', async (t) => {
  const config = { ...against(), log: { level: 'info' } }
  const proc = cli(['--config', configFile(config)], SECRETS_ENV)
  t.teardown(() => proc.kill('SIGTERM'))
  let location = ''
  t.ok(
    await until(proc, async () => {
      const res = await rawRequest(publicUrl, '/api/v1/openid/redirect', { headers: { accept: 'text/html' } })
      location = String(res.headers.location ?? '')
      return res.status === 302 && location.startsWith(issuer)
    }),
    'a sign-in is redirected to the provider',
  )
  const sent = new URL(location).searchParams.get('redirect_uri')
  // Log lines leave the process's buffer about once a second.
  const logged = (): Array<Record<string, unknown>> =>
    proc
      .stdout()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
  t.ok(await until(proc, async () => logged().some((line) => line.msg === 'provider metadata loaded')), 'the log is written')
  const summaries = logged().filter((line) => line.msg === STARTUP_SUMMARY_MESSAGE)
  t.equal(summaries.length, 1, 'one line for the one provider')
  t.match(summaries[0], {
    level: 30,
    provider: 'default',
    issuer,
    redirectUris: [sent],
    clientAuthMethod: 'client_secret_basic',
    scopes: ['openid', 'profile', 'email'],
    cookie: { name: 'ogw', domain: null, secure: false, sameSite: 'lax' },
    sessionStore: { kind: 'cookie' },
    upstreams: [{ name: 'app', match: { pathPrefix: '/' }, target: 'http://127.0.0.1:9/', auth: 'none' }],
  })
  t.equal(sent, `${publicUrl}/api/v1/openid/callback`)
  t.notMatch(proc.stdout(), SECRET, 'the client secret is not logged')
  t.notMatch(proc.stdout(), COOKIE, 'nor the cookie secret')
})

t.test('the summary names the Redis store by its addresses and the upstreams without userinfo; never a password', async (t) => {
  const { provider: _one, ...base } = valid(8080, 'http://127.0.0.1:3000/app')
  const config = resolveConfig(
    {
      ...base,
      providers: [
        { name: 'a', issuer: 'https://a.example', clientId: 'gw', clientSecret: 'client-secret-a-0123' },
        {
          name: 'b',
          issuer: 'https://b.example',
          clientId: 'gw',
          clientAuthMethod: 'client_secret_post',
          clientSecret: 'client-secret-b-0123',
          offlineAccess: true,
        },
      ],
      cookies: { secrets: [COOKIE], secure: true, domain: 'example.test', sameSite: 'strict' },
      session: { store: 'redis', redisUrl: 'rediss://default:redis-password-456@redis.internal:6380/0' },
    },
    {},
  )
  // The schema refuses credentials in a target; the summary would not print them either.
  const upstream = config.upstreams[0]
  if (upstream !== undefined) upstream.target = 'http://user:upstream-password-123@127.0.0.1:3000/app'
  const lines = startupSummary(config)
  const text = JSON.stringify(lines)
  for (const secret of ['upstream-password-123', 'redis-password-456', 'client-secret-a-0123', 'client-secret-b-0123', COOKIE]) t.notMatch(text, secret)
  t.match(lines, [
    { fields: { provider: 'a', redirectUris: ['http://127.0.0.1:8080/api/v1/openid/callback/a'], clientAuthMethod: 'client_secret_basic' } },
    {
      fields: {
        provider: 'b',
        redirectUris: ['http://127.0.0.1:8080/api/v1/openid/callback/b'],
        clientAuthMethod: 'client_secret_post',
        scopes: ['openid', 'profile', 'email', 'offline_access'],
      },
    },
  ])
  t.match(lines[0]?.fields, {
    cookie: { name: '__Secure-ogw', domain: 'example.test', secure: true, sameSite: 'strict' },
    sessionStore: { kind: 'redis', topology: 'single', address: 'rediss://redis.internal:6380' },
    upstreams: [{ target: 'http://127.0.0.1:3000/app' }],
  })
})
