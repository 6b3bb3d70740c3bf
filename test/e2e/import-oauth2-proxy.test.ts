import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { parse, stringify } from 'yaml'
import { LiveGateway } from '#src/runtime/live'
import { runImport } from '#src/import/command'
import { Browser } from '../fixtures/browser.ts'
import { startOAuth2Proxy } from '../fixtures/oauth2-proxy.ts'
import { startTestProvider } from '../fixtures/provider.ts'
import { freePort, reservePort } from '../fixtures/stack.ts'
import { startEchoUpstream, type RecordedRequest } from '../fixtures/upstream.ts'

// `openid-gateway import oauth2-proxy` beside the real oauth2-proxy (v7.15.6, .ci/peers): one
// configuration, written once in oauth2-proxy's form, runs oauth2-proxy as it is and the gateway as
// the converter wrote it (its secrets from the environment), in front of the same echo upstream
// and the same provider client, whose redirect URIs are the two origins' /oauth2/callback (the
// converter keeps oauth2-proxy's callback path). The same user signs in at both, and what the
// application receives is compared: the identity headers, the access token or HTTP Basic
// credentials where the configuration passes them, and which anonymous requests its skip-auth
// routes let through. `--public-url` gives the gateway its own origin beside oauth2-proxy's.

const CLIENT_SECRET = 'import-client-secret-0123456789'
// oauth2-proxy takes 16, 24 or 32 bytes, the gateway 32 or more: 32 suits both.
const COOKIE_SECRET = 'import-cookie-secret-32-bytes!!!'
const BASIC_AUTH_PASSWORD = 'import-basic-password'

t.setTimeout(100_000)

const upstream = await startEchoUpstream()
t.teardown(() => upstream.close())
const dir = mkdtempSync(join(tmpdir(), 'ogw-import-e2e-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
/** The origins of each scenario: oauth2-proxy's and the gateway's (reserved until it listens). */
const SCENARIOS = 3
const pairs = await Promise.all(
  Array.from({ length: SCENARIOS }, async () => {
    const o2pPort = await freePort()
    const reservation = await reservePort()
    t.teardown(() => reservation.release())
    return { o2pPort, o2pOrigin: `http://127.0.0.1:${o2pPort}`, reservation, gwOrigin: `http://127.0.0.1:${reservation.port}` }
  }),
)
type Pair = (typeof pairs)[number]
const idp = await startTestProvider(t, {
  clients: [
    {
      clientId: 'app',
      clientSecret: CLIENT_SECRET,
      redirectUris: pairs.flatMap((p) => [`${p.o2pOrigin}/oauth2/callback`, `${p.gwOrigin}/oauth2/callback`]),
      postLogoutRedirectUris: [],
    },
  ],
})

/** Runs the converter on `args`; the configuration (stdout), the report (stderr), the exit code. */
function convert(pair: Pair, args: string[]): { yaml: string; report: string; code: number } {
  let yaml = ''
  let report = ''
  const code = runImport(['oauth2-proxy', '--public-url', pair.gwOrigin, ...args], { stdout: (s) => (yaml += s), stderr: (s) => (report += s), cwd: dir })
  return { yaml, report, code }
}

/** Starts the gateway on the converted configuration, listening where the test reserved, its secrets from the environment. */
async function startGateway(t: Test, pair: Pair, yaml: string): Promise<void> {
  const config = parse(yaml) as Record<string, Record<string, unknown>>
  config.server = { ...config.server, host: '127.0.0.1', port: pair.reservation.port }
  config.log = { level: 'silent' }
  const path = join(dir, `gateway-${pair.reservation.port}.yaml`)
  writeFileSync(path, stringify(config))
  const live = await LiveGateway.start({
    path,
    env: { OIDC_CLIENT_SECRET: CLIENT_SECRET, COOKIE_SECRET, BASIC_AUTH_PASSWORD },
    listening: pair.reservation.server,
  })
  pair.reservation.handOver()
  t.teardown(() => live.close(1000))
  await live.listen()
  await live.app.providersReady
}

/** A browser signs in at `origin` from a deep link as `username`; the request the application received. */
async function signedInRequest(origin: string, username: string): Promise<RecordedRequest> {
  const browser = new Browser()
  const callback = await browser.signIn(`${origin}/deep/link`, username)
  const location = callback.headers.get('location')
  if (location === null) throw new Error(`${origin}: the callback did not redirect: ${callback.status} ${await callback.text()}`)
  const before = upstream.requests.length
  await browser.follow(new URL(location, callback.url))
  const got = upstream.requests.slice(before).at(-1)
  if (got === undefined) throw new Error(`${origin}: nothing reached the application`)
  return got
}

const IDENTITY = ['x-forwarded-user', 'x-forwarded-email', 'x-forwarded-groups', 'x-forwarded-preferred-username'] as const

/** The identity headers as the application read them, and the Authorization header's form (its token elided). */
function received(request: RecordedRequest): Record<string, string> {
  const out: Record<string, string> = {}
  for (const name of IDENTITY) out[name] = String(request.headers[name] ?? 'absent')
  const authorization = request.headers.authorization
  out.authorization = authorization === undefined ? 'absent' : authorization.replace(/^Bearer [A-Za-z0-9._~+/=-]{20,}$/, 'Bearer <token>')
  return out
}

t.test('oauth2-proxy.cfg: the identity headers of a groups rule', async (t) => {
  const pair = pairs[0] as Pair
  const { o2pOrigin, gwOrigin } = pair
  const cfg = join(dir, 'oauth2-proxy.cfg')
  writeFileSync(
    cfg,
    [
      'provider = "oidc"',
      `oidc_issuer_url = "${idp.issuer}"`,
      'client_id = "app"',
      `client_secret = "${CLIENT_SECRET}"`,
      `cookie_secret = "${COOKIE_SECRET}"`,
      'cookie_secure = false',
      `redirect_url = "${o2pOrigin}/oauth2/callback"`,
      `upstreams = ["${upstream.url}/"]`,
      'email_domains = ["example.com"]',
      'allowed_groups = ["admins"]',
      'scope = "openid email profile groups"',
      'code_challenge_method = "S256"',
      'skip_provider_button = true',
      '',
    ].join('\n'),
  )
  const converted = convert(pair, ['oauth2-proxy.cfg'])
  t.equal(converted.code, 0, converted.report)
  t.notOk(converted.yaml.includes(CLIENT_SECRET) || converted.yaml.includes(COOKIE_SECRET), 'no secret copied')
  await startOAuth2Proxy(t, () => [`--config=${cfg}`], pair.o2pPort)
  await startGateway(t, pair, converted.yaml)

  const o2p = received(await signedInRequest(o2pOrigin, 'alice'))
  const gw = received(await signedInRequest(gwOrigin, 'alice'))
  t.strictSame(gw, o2p, 'the application receives the same identity from both')
  t.equal(gw['x-forwarded-user'], 'alice')
  t.equal(gw['x-forwarded-email'], 'alice@example.com')
  t.equal(gw['x-forwarded-groups'], 'admins,staff')
  t.equal(gw['x-forwarded-preferred-username'], 'alice')
  t.equal(gw.authorization, 'absent', 'no token passed: none received')

  // The groups rule carried: bob (staff only) is refused by both.
  for (const origin of [o2pOrigin, gwOrigin]) {
    const browser = new Browser()
    const before = upstream.requests.length
    const callback = await browser.signIn(`${origin}/deep/link`, 'bob')
    const location = callback.headers.get('location')
    const final = location === null ? callback : (await browser.follow(new URL(location, callback.url))).response
    t.equal(final.status, 403, `${origin}: bob is refused`)
    t.equal(upstream.requests.length, before, `${origin}: nothing reached the application`)
  }
})

t.test('alpha configuration and flags: the access token as Bearer, the headers it names', async (t) => {
  const pair = pairs[1] as Pair
  const { o2pOrigin, gwOrigin } = pair
  const alpha = join(dir, 'alpha.yaml')
  writeFileSync(
    alpha,
    stringify({
      server: { bindAddress: `127.0.0.1:${pair.o2pPort}` },
      upstreamConfig: { upstreams: [{ id: 'app', path: '/', uri: upstream.url }] },
      injectRequestHeaders: [
        { name: 'X-Forwarded-User', values: [{ claimSource: { claim: 'user' } }] },
        { name: 'X-Forwarded-Email', values: [{ claimSource: { claim: 'email' } }] },
        { name: 'X-Forwarded-Groups', values: [{ claimSource: { claim: 'groups' } }] },
        { name: 'X-Forwarded-Preferred-Username', values: [{ claimSource: { claim: 'preferred_username' } }] },
        { name: 'Authorization', values: [{ claimSource: { claim: 'access_token', prefix: 'Bearer ' } }] },
      ],
      providers: [
        {
          id: 'idp',
          provider: 'oidc',
          clientID: 'app',
          clientSecret: CLIENT_SECRET,
          scope: 'openid email profile groups',
          code_challenge_method: 'S256',
          oidcConfig: { issuerURL: idp.issuer, emailClaim: 'email', groupsClaim: 'groups' },
        },
      ],
    }),
  )
  // The rest as oauth2-proxy's command line, after -- (as a container's args).
  const flags = [
    `--alpha-config=${alpha}`,
    `--cookie-secret=${COOKIE_SECRET}`,
    '--cookie-secure=false',
    '--email-domain=*',
    `--redirect-url=${o2pOrigin}/oauth2/callback`,
    '--skip-provider-button',
  ]
  const converted = convert(pair, ['--', ...flags])
  t.equal(converted.code, 0, converted.report)
  t.notOk(converted.yaml.includes(CLIENT_SECRET) || converted.yaml.includes(COOKIE_SECRET), 'no secret copied')
  t.match(parse(converted.yaml), { upstreams: [{ forwardAccessToken: true }] })
  await startOAuth2Proxy(t, () => flags, pair.o2pPort, false, false)
  await startGateway(t, pair, converted.yaml)

  const o2p = received(await signedInRequest(o2pOrigin, 'alice'))
  const gw = received(await signedInRequest(gwOrigin, 'alice'))
  t.strictSame(gw, o2p, 'the application receives the same identity and token form from both')
  t.equal(gw.authorization, 'Bearer <token>', 'the access token as Bearer')
  t.equal(gw['x-forwarded-groups'], 'admins,staff')
})

t.test('flags: skip-auth routes and regexes as public paths, the user as HTTP Basic', async (t) => {
  const pair = pairs[2] as Pair
  const { o2pOrigin, gwOrigin } = pair
  const flags = [
    '--provider=oidc',
    `--oidc-issuer-url=${idp.issuer}`,
    '--client-id=app',
    `--client-secret=${CLIENT_SECRET}`,
    `--cookie-secret=${COOKIE_SECRET}`,
    '--cookie-secure=false',
    '--email-domain=*',
    `--redirect-url=${o2pOrigin}/oauth2/callback`,
    `--upstream=${upstream.url}/`,
    '--scope=openid email profile groups',
    '--code-challenge-method=S256',
    '--skip-provider-button',
    '--skip-auth-route=GET=^/public/',
    '--skip-auth-regex=/health$',
    '--pass-basic-auth',
    `--basic-auth-password=${BASIC_AUTH_PASSWORD}`,
  ]
  const converted = convert(pair, ['--', ...flags])
  t.equal(converted.code, 0, converted.report)
  t.notOk(converted.yaml.includes(BASIC_AUTH_PASSWORD), 'the Basic password is not copied')
  t.match(converted.report, /^set BASIC_AUTH_PASSWORD: /m)
  t.match(parse(converted.yaml), {
    upstreams: [
      { forwardBasicAuth: { password: '${BASIC_AUTH_PASSWORD}' }, publicPaths: [{ regex: '^.*/health$' }, { regex: '^/public/.*$', methods: ['GET'] }] },
    ],
  })
  await startOAuth2Proxy(t, () => flags, pair.o2pPort)
  await startGateway(t, pair, converted.yaml)

  /** Whether an anonymous request reaches the application. */
  const reaches = async (origin: string, method: string, path: string): Promise<boolean> => {
    const before = upstream.requests.length
    const response = await fetch(`${origin}${path}`, { method, redirect: 'manual' })
    await response.arrayBuffer()
    return upstream.requests.length > before
  }
  const cases: Array<[string, string, boolean]> = [
    ['GET', '/public/page', true],
    ['POST', '/public/page', false],
    ['GET', '/publicity', false],
    ['GET', '/x/health', true],
    ['DELETE', '/api/health', true],
    ['GET', '/health/x', false],
    ['GET', '/deep/link', false],
  ]
  for (const [method, path, open] of cases) {
    t.equal(await reaches(o2pOrigin, method, path), open, `oauth2-proxy: ${method} ${path}`)
    t.equal(await reaches(gwOrigin, method, path), open, `gateway: ${method} ${path}, as oauth2-proxy`)
  }
  // The documented difference: a GET= route is public for HEAD at the gateway only.
  t.equal(await reaches(o2pOrigin, 'HEAD', '/public/page'), false, 'oauth2-proxy: HEAD is not GET')
  t.equal(await reaches(gwOrigin, 'HEAD', '/public/page'), true, 'gateway: GET also covers HEAD')

  const o2p = received(await signedInRequest(o2pOrigin, 'alice'))
  const gw = received(await signedInRequest(gwOrigin, 'alice'))
  t.strictSame(gw, o2p, 'the application receives the same identity and Basic credentials from both')
  t.equal(gw.authorization, `Basic ${Buffer.from(`alice:${BASIC_AUTH_PASSWORD}`).toString('base64')}`)
})
