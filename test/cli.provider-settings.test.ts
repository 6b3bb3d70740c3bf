// What the command line says about the provider, against the real development provider
// (oidc-provider): `check --online` compares its discovery document and JWKS with the
// configuration and probes the client (its credentials by a token request with a made-up code,
// its redirect URI by a pushed authorization request or the authorization endpoint), and `run`
// logs once at start what to register there. One provider serves most cases: it takes
// client_secret_basic and private_key_jwt, not client_secret_post, and offers PAR.

import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { rawRequest } from './fixtures/http.ts'
import { cli, configFile, COOKIE, SECRET, SECRETS_ENV, until, valid } from './fixtures/cli.ts'
import { startTestProvider } from './fixtures/provider.ts'
import { freePort } from './fixtures/stack.ts'
import { startupSummary, STARTUP_SUMMARY_MESSAGE } from '#src/config/summary'
import { resolveConfig } from '#src/config/load'

const port = await freePort()
const publicUrl = `http://127.0.0.1:${port}`
const provider = await startTestProvider(t, {
  // The one provider's callback, and the callback of provider `good` of the two-provider test.
  clients: [{ clientId: 'gw', clientSecret: SECRET, redirectUris: [`${publicUrl}/api/v1/openid/callback`, `${publicUrl}/api/v1/openid/callback/good`] }],
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
  t.match(
    run.stdout,
    /\n {2}ok {6}client credentials: the token endpoint authenticated the client \(client_secret_basic\) and refused only the made-up code \(invalid_grant\)\n/,
  )
  t.match(
    run.stdout,
    `\n  ok      redirect URI: ${publicUrl}/api/v1/openid/callback is registered: the provider accepted a pushed authorization request for it (its request_uri is never used and expires by itself)\n`,
  )
  t.notMatch(run.stdout, /PROBLEM|WARNING/)
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
    clients: [{ clientId: 'gw', clientSecret: SECRET, redirectUris: [`${publicUrl}/api/v1/openid/callback/basic`] }],
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

t.test('check --online: a wrong client secret is a problem naming the keys, never the secret, exit 1', async (t) => {
  const wrong = 'cli-wrong-secret-value-abc'
  const run = await cli(['check', '--online', '--config', configFile(against())], { ...SECRETS_ENV, CLI_SECRET: wrong }).done
  t.equal(run.code, 1, run.stderr)
  t.match(
    run.stdout,
    '\n  PROBLEM client credentials: the token endpoint refused the client (invalid_client: client authentication failed, HTTP 401): sign-ins would fail at the callback. Check provider.clientId and provider.clientSecret, and that the provider registered the client for client_secret_basic (provider.clientAuthMethod)\n',
  )
  // The pushed request needs the refused credentials: the authorization endpoint, which takes none, tells instead.
  t.match(
    run.stdout,
    `\n  ok      redirect URI: ${publicUrl}/api/v1/openid/callback is registered: the authorization endpoint sent a sign-in request with prompt=none back to it (error=login_required)\n`,
  )
  t.strictSame(lastLines(run.stdout, 1), ['PROBLEM: provider default: client credentials'])
  t.notMatch(run.stdout + run.stderr, wrong, 'the secret is not printed')
})

t.test('check --online: a redirect URI the provider does not know is a problem naming it, found by PAR, exit 1', async (t) => {
  const elsewhere = `http://localhost:${port}`
  const run = await online({ ...against(), server: { ...valid(port, 'http://127.0.0.1:9').server, publicUrl: elsewhere } })
  t.equal(run.code, 1, run.stderr)
  t.match(
    run.stdout,
    `\n  PROBLEM redirect URI: the provider refused ${elsewhere}/api/v1/openid/callback in a pushed authorization request (invalid_request: redirect_uri did not match any of the client's registered redirect_uris): register it, exactly so, as a redirect URI of client gw\n`,
  )
  t.match(run.stdout, /\n {2}ok {6}client credentials: /, 'the credentials are right')
  t.strictSame(lastLines(run.stdout, 1), ['PROBLEM: provider default: redirect URI'])
})

t.test('check --online without PAR: the authorization endpoint tells a registered redirect URI from an unknown one', async (t) => {
  const noPar = await startTestProvider(t, {
    clients: [{ clientId: 'gw', clientSecret: SECRET, redirectUris: [`${publicUrl}/api/v1/openid/callback`] }],
    pushedAuthorizationRequests: 'off',
  })
  const config = against({ issuer: noPar.issuer })
  const registered = await online(config)
  t.equal(registered.code, 0, registered.stderr + registered.stdout)
  t.match(
    registered.stdout,
    `\n  ok      redirect URI: ${publicUrl}/api/v1/openid/callback is registered: the authorization endpoint sent a sign-in request with prompt=none back to it (error=login_required)\n`,
  )
  const elsewhere = `http://localhost:${port}`
  const unknown = await online({ ...config, server: { ...valid(port, 'http://127.0.0.1:9').server, publicUrl: elsewhere } })
  t.equal(unknown.code, 1, unknown.stderr)
  t.match(
    unknown.stdout,
    `\n  PROBLEM redirect URI: the authorization endpoint refused ${elsewhere}/api/v1/openid/callback (HTTP 400) and did not send the sign-in back to it: register it, exactly so, as a redirect URI of client gw\n`,
  )
  t.strictSame(lastLines(unknown.stdout, 1), ['PROBLEM: provider default: redirect URI'])
})

t.test('check --online with provider.dpop: the probes send DPoP proofs as sign-ins do, with the nonce the provider demands', async (t) => {
  const demanding = await startTestProvider(t, {
    clients: [{ clientId: 'gw', clientSecret: SECRET, redirectUris: [`${publicUrl}/api/v1/openid/callback`], dpopBoundAccessTokens: true }],
    dpopNonces: true,
  })
  const run = await online(against({ issuer: demanding.issuer, dpop: true }))
  t.equal(run.code, 0, run.stderr + run.stdout)
  t.match(run.stdout, /\n {2}ok {6}client credentials: the token endpoint authenticated the client \(client_secret_basic\)/)
  t.match(run.stdout, /\n {2}ok {6}redirect URI: .* the provider accepted a pushed authorization request/)
})

/**
 * A provider that is the development provider but for its token endpoint, which answers `token`:
 * its own discovery document (the development provider's, with this issuer, this token endpoint
 * and no PAR), the rest of its endpoints the development provider's.
 */
async function brokenTokenEndpoint(t: Test, token: { status: number; type: string; body: string }): Promise<string> {
  const metadata = (await (await fetch(`${issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>
  const server = createServer((req, res) => {
    if (req.url === '/.well-known/openid-configuration') {
      const { pushed_authorization_request_endpoint: _par, ...rest } = metadata
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...rest, issuer: origin, token_endpoint: `${origin}/token` }))
    } else if (req.url === '/token' && req.method === 'POST') {
      req.resume()
      res.writeHead(token.status, { 'content-type': token.type }).end(token.body)
    } else res.writeHead(404).end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return origin
}

t.test('check --online: an answer that tells nothing is a warning, not a problem; the OK line says what could not be checked, exit 0', async (t) => {
  const check = async (token: {
    status: number
    type: string
    body: string
  }): Promise<{ run: Awaited<ReturnType<typeof online>>; at: string; path: string }> => {
    const at = await brokenTokenEndpoint(t, token)
    const path = configFile(against({ issuer: at }))
    return { run: await cli(['check', '--online', '--config', path], SECRETS_ENV).done, at, path }
  }
  // An OAuth error that is neither invalid_client nor invalid_grant.
  const other = await check({ status: 400, type: 'application/json', body: '{"error":"unsupported_grant_type","error_description":"not here"}' })
  t.equal(other.run.code, 0, other.run.stderr + other.run.stdout)
  t.match(
    other.run.stdout,
    '\n  WARNING client credentials: cannot tell: the token endpoint answered a made-up code with unsupported_grant_type: not here, HTTP 400, neither invalid_client (wrong credentials) nor invalid_grant (right ones)\n',
  )
  t.strictSame(lastLines(other.run.stdout, 1), [
    `OK: provider default: ${other.at} supports this configuration (${other.path}); could not check: client credentials`,
  ])
  // A token endpoint that fails says nothing of the credentials either.
  const failing = await check({ status: 503, type: 'text/html', body: '<html>down</html>' })
  t.equal(failing.run.code, 0, failing.run.stderr + failing.run.stdout)
  t.match(failing.run.stdout, '\n  WARNING client credentials: cannot tell: /token answered HTTP 503\n')
  t.match(failing.run.stdout, /\n {2}ok {6}redirect URI: /, 'the redirect URI is still checked')
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

t.test('the startup summary names every cookie domain of cookies.domains', async (t) => {
  const base = valid(8080, 'http://127.0.0.1:3000/app')
  const config = resolveConfig(
    { ...base, cookies: { secrets: [COOKIE], secure: true, domains: ['a.example.test', 'b.example.org'] }, redirects: { allowedHosts: ['.b.example.org'] } },
    SECRETS_ENV,
  )
  t.match(startupSummary(config)[0]?.fields, { cookie: { name: '__Secure-ogw', domain: null, domains: ['a.example.test', 'b.example.org'] } })
})
