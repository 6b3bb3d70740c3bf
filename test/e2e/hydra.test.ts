// Ory Hydra v2.3 as the provider, run as docs/providers/hydra.md says: the gateway configuration
// and the client registration are read out of the page, the client is created through Hydra's
// admin API, and the browser walks Hydra and the login-and-consent app of test/fixtures/hydra.ts.
// One Hydra for the whole file (a heavy peer); each scenario signs in a browser of its own.
//
// What Hydra does that the development provider does not, and what each test pins:
// - it rotates refresh tokens strictly, and a spent one redeemed again is refused AND revokes
//   every token of its grant (fosite handler/oauth2/flow_refresh.go, handleRefreshTokenReuse);
// - its back-channel logout token names only `sid` (no `sub`, no `exp`, `typ: JWT`), and is sent
//   when a login session ends (consent/strategy_default.go, executeBackChannelLogout);
// - its discovery document (oauth2/handler.go) has no pushed_authorization_request_endpoint and
//   no token_endpoint_auth_signing_alg_values_supported; its private_key_jwt accepts only the
//   token endpoint URL as the client assertion's `aud` (fosite client_authentication.go).

import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import YAML from 'yaml'
import pino from 'pino'
import { clientJwks } from '#src/oidc/client-auth'
import { checkProviders } from '#src/oidc/provider-support'
import type { GatewayConfig } from '#src/options/types'
import type { ProviderConfig } from '#src/options/types'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import type { Browser } from '../fixtures/browser.ts'
import { HYDRA_PASSWORD, startHydra, type Hydra, type HydraRequest } from '../fixtures/hydra.ts'
import { problemCode } from '../fixtures/http.ts'
import { fencedBlocks, recipe, ROOT } from '../fixtures/markdown.ts'
import { eventually } from '../fixtures/poll.ts'
import { assertRefusedAtDiscovery, CLIENT_SECRET, refreshTokenOf, startStack, type Stack } from '../fixtures/stack.ts'

const PAGE = 'docs/providers/hydra.md'
const EXAMPLE_ORIGIN = 'https://app.example.com'
// The page shows two YAML blocks: the configuration, then the provider keys of private_key_jwt.
const yamlBlocks = fencedBlocks({ file: PAGE, text: readFileSync(join(ROOT, PAGE), 'utf8') }).filter((b) => b.lang === 'yaml')
if (yamlBlocks.length !== 2) throw new Error(`${PAGE} must show two yaml blocks (the configuration, the private_key_jwt keys), it shows ${yamlBlocks.length}`)
const pageConfig = YAML.parse(yamlBlocks[0]?.body ?? '') as { provider: Record<string, unknown>; upstreams: Array<Record<string, unknown>> }
const pageKeyProvider = (YAML.parse(yamlBlocks[1]?.body ?? '') as { provider: Record<string, unknown> }).provider
const pageClient = recipe(PAGE, 'json')

t.test("config/providers/hydra.yaml is the page's configuration", async (t) => {
  const file = YAML.parse(readFileSync(join(ROOT, 'config/providers/hydra.yaml'), 'utf8')) as typeof pageConfig
  t.strictSame(file.provider, pageConfig.provider)
  t.strictSame(file.upstreams, pageConfig.upstreams)
})

const hydra = await startHydra(t)

/** The page's client registration for a gateway at `gw`, with `overrides`. */
function registration(gw: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const page = JSON.parse(pageClient.replaceAll(EXAMPLE_ORIGIN, gw).replace('${OIDC_CLIENT_SECRET}', CLIENT_SECRET)) as Record<string, unknown>
  return { ...page, ...overrides }
}

/**
 * A gateway configured as the page says (its `provider` and `upstreams`, the upstreams' targets
 * the stack's echo upstream), `provider` merged over it, and its client registered at Hydra as the
 * page says, `client` merged over it.
 */
async function gateway(
  t: Test,
  options: {
    provider?: Record<string, unknown>
    client?: Record<string, unknown>
    logStream?: { write(line: string): void }
    log?: string
    wait?: boolean
    replicas?: number
    /** Another Hydra than the file's. */
    at?: Hydra
  } = {},
): Promise<Stack> {
  const idp = options.at ?? hydra
  const { issuer: _issuer, postLogoutRedirectUri, ...provider } = pageConfig.provider
  const stack = await startStack(t, {
    issuer: idp.issuer,
    postLogoutPath: new URL(String(postLogoutRedirectUri)).pathname,
    upstreams: pageConfig.upstreams.map(({ target: _target, ...upstream }) => upstream),
    config: {
      provider: { ...provider, clientSecret: CLIENT_SECRET, ...options.provider },
      ...(options.log === undefined ? {} : { log: { level: options.log } }),
    },
    ...(options.logStream === undefined ? {} : { logStream: options.logStream }),
    ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
  })
  const clientId = String(options.provider?.clientId ?? provider.clientId)
  await idp.createClient(registration(stack.gw, { client_id: clientId, ...options.client }))
  t.teardown(() => idp.adminCall('DELETE', `/admin/clients/${encodeURIComponent(clientId)}`).catch(() => undefined))
  if (options.wait !== false) await stack.app.providersReady
  return stack
}

/** A browser signed in as `user` through the gateway, Hydra and the login app. */
async function signedIn(t: Test, stack: Stack, user = 'alice'): Promise<Browser> {
  const browser = stack.browser()
  const callback = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, user, { password: HYDRA_PASSWORD })
  t.equal(callback.status, 200, `${user} signed in`)
  return browser
}

async function page(browser: Browser, url: string): Promise<Response> {
  return browser.fetch(url, { headers: { accept: 'application/json' } })
}

/** A client id of its own for each gateway of this file (one Hydra holds them all). */
function clientId(name: string): string {
  return `gateway-${name}`
}

/** The login requests the app saw since `since` (an index into hydra.requests). */
function loginsSince(since: number): HydraRequest[] {
  return hydra.requests.slice(since).filter((r) => r.kind === 'login')
}

const main = await gateway(t)

t.test('sign-in from a deep link: the gateway, Hydra, the login app and the callback', async (t) => {
  const browser = main.browser()
  const first = await browser.fetch(`${main.gw}/reports?year=2026`, { navigate: true })
  t.equal(first.status, 302, 'a page load is sent to sign in')
  const since = hydra.requests.length
  const callback = await browser.signIn(new URL(first.headers.get('location') ?? '', main.gw), 'alice', { password: HYDRA_PASSWORD })
  t.equal(callback.status, 302)
  t.equal(callback.headers.get('location'), '/reports?year=2026', 'back to the deep link')
  t.strictSame(browser.prompts, ['login'], 'the login form only: the page registers the gateway with skip_consent')

  // The authorization request Hydra handed to the login app: PKCE S256, no PAR (Hydra has none,
  // and `auto` uses the classic URL), offline_access with prompt=consent.
  const [login] = loginsSince(since)
  const request = new URL(String(login?.request_url))
  t.equal(`${request.origin}${request.pathname}`, `${hydra.issuer}/oauth2/auth`)
  t.equal(request.searchParams.get('code_challenge_method'), 'S256')
  t.equal(request.searchParams.get('request_uri'), null)
  t.equal(request.searchParams.get('prompt'), 'consent')
  t.strictSame(request.searchParams.get('scope')?.split(' ').toSorted(), ['email', 'offline_access', 'openid', 'profile'])

  const res = await browser.fetch(`${main.gw}/reports?year=2026`, { navigate: true })
  t.equal(res.status, 200)
  const seen = main.upstream.requests.at(-1)
  t.equal(seen?.url, '/reports?year=2026')
  t.equal(seen?.headers['x-forwarded-user'], 'alice', "Hydra's sub: the subject the login app accepted")
  t.equal(seen?.headers['x-forwarded-email'], 'alice@example.com', "from the consent app's session.id_token")
  t.equal(seen?.headers['x-forwarded-groups'], 'admins,staff')
  t.equal((await page(browser, `${main.gw}/admin/users`)).status, 200, "the page's allow.groups: admins")

  const bob = await signedIn(t, main, 'bob')
  const refused = await page(bob, `${main.gw}/admin/users`)
  t.equal(refused.status, 403)
  t.equal(await problemCode(refused), 'forbidden')

  // Hydra remembers the login: another sign-in in the same browser shows no form at all.
  const again = await browser.signIn(`${main.gw}/api/v1/openid/redirect`, 'alice', { password: HYDRA_PASSWORD })
  t.equal(again.status, 200)
  t.strictSame(browser.prompts, ['login'], 'no second login form')
  t.equal(hydra.requests.filter((r) => r.kind === 'login').at(-1)?.skip, true, 'Hydra said skip')

  const wrong = await main
    .browser()
    .signIn(`${main.gw}/api/v1/openid/redirect`, 'alice', { password: 'guess' })
    .catch((err: Error) => err)
  t.match(String(wrong), /unexpected provider page 401/, 'a wrong password never reaches the callback')
})

/** Redeems a refresh token at Hydra's token endpoint as the gateway's client. */
async function redeem(token: string, client: string): Promise<{ status: number; body: Record<string, string> }> {
  const res = await fetch(`${hydra.issuer}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${client}:${CLIENT_SECRET}`).toString('base64')}` },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: token }),
  })
  return { status: res.status, body: (await res.json()) as Record<string, string> }
}

t.test('refresh rotation: the gateway keeps the newest token and never redeems a spent one', async (t) => {
  const browser = await signedIn(t, main)
  const cookies = (): string => browser.cookieHeader(`${main.gw}/api/v1/openid/refresh`)
  const first = cookies()
  const rt1 = refreshTokenOf(main, first)

  const refreshed = await page(browser, `${main.gw}/api/v1/openid/refresh`)
  t.equal(refreshed.status, 200)
  const rt2 = refreshTokenOf(main, cookies())
  t.not(rt2, rt1, 'Hydra rotated the refresh token, and the session holds the new one')

  // A request the browser sent with its old cookies (before it had the new ones): the gateway
  // answers from the refresh it just made instead of redeeming rt1 again, which Hydra would
  // refuse and answer by revoking rt2 too.
  const stale = await fetch(`${main.gw}/api/v1/openid/refresh`, { headers: { cookie: first, accept: 'application/json' } })
  t.equal(stale.status, 200, 'the stale request is answered')
  await stale.body?.cancel()

  // Concurrent refreshes of one session share one redemption.
  const concurrent = await Promise.all(
    Array.from({ length: 4 }, () => fetch(`${main.gw}/api/v1/openid/refresh`, { headers: { cookie: cookies(), accept: 'application/json' } })),
  )
  t.strictSame(
    concurrent.map((r) => r.status),
    [200, 200, 200, 200],
  )
  await Promise.all(concurrent.map((r) => r.text()))

  const after = await page(browser, `${main.gw}/api/v1/openid/refresh`)
  t.equal(after.status, 200, 'the newest token still works: nothing the gateway did made Hydra revoke the grant')
  const rt3 = refreshTokenOf(main, cookies())
  t.not(rt3, rt2)
  t.equal((await redeem(rt1, 'gateway')).status, 400, 'rt1 is spent at Hydra')
})

t.test("a spent refresh token redeemed by someone else: Hydra revokes the grant, and the gateway's session ends cleanly", async (t) => {
  const browser = await signedIn(t, main)
  const cookies = (): string => browser.cookieHeader(`${main.gw}/api/v1/openid/refresh`)
  const rt1 = refreshTokenOf(main, cookies())
  t.equal((await page(browser, `${main.gw}/api/v1/openid/refresh`)).status, 200)
  const rt2 = refreshTokenOf(main, cookies())

  // A copy of rt1 (a leaked cookie, a log) redeemed at Hydra: refused, and Hydra revokes every
  // token of the grant, rt2 included (RFC 9700 4.14.2: it cannot tell the thief from the client).
  const reuse = await redeem(rt1, 'gateway')
  t.equal(reuse.status, 400)
  t.equal(reuse.body.error, 'invalid_grant')
  t.match(reuse.body.error_description, /already used/)
  t.equal((await redeem(rt2, 'gateway')).body.error, 'invalid_grant', 'rt2 was revoked with it')

  // The gateway's next refresh is refused (invalid_grant): the refresh endpoint answers 409
  // refresh_token_invalid, the session ends, its cookies are cleared, and the user signs in
  // again. It is Hydra's decision, not a gateway fault.
  const res = await page(browser, `${main.gw}/api/v1/openid/refresh`)
  t.equal(res.status, 409)
  t.equal(await problemCode(res), 'refresh_token_invalid')
  t.same(
    browser.cookies().filter((c) => c.name.startsWith('ogw')),
    [],
    'the session cookies are cleared',
  )
  const nav = await browser.fetch(`${main.gw}/reports`, { navigate: true })
  t.equal(nav.status, 302, 'a page load goes to sign in again')
})

t.test('cookie store, several replicas: old cookies at another replica redeem the spent token, and Hydra revokes the grant', async (t) => {
  const stack = await gateway(t, { provider: { clientId: clientId('replicas') }, replicas: 2 })
  const browser = await signedIn(t, stack)
  const old = browser.cookieHeader(`${stack.gw}/api/v1/openid/refresh`)
  t.equal((await page(browser, `${stack.gw}/api/v1/openid/refresh`)).status, 200, 'refreshed at the first replica')

  // The second replica has no memo of that refresh (it is per replica with this store): it
  // redeems the spent token, Hydra refuses it and revokes the grant.
  const stale = await fetch(`${stack.replicas[1]?.gw}/api/v1/openid/refresh`, { headers: { cookie: old, accept: 'application/json' } })
  t.equal(stale.status, 409)
  t.equal(await problemCode(stale), 'refresh_token_invalid')
  const res = await page(browser, `${stack.gw}/api/v1/openid/refresh`)
  t.equal(res.status, 409, "the session's newest token went with the grant: the user signs in again")
})

t.test(
  "cookie store, several replicas, and Hydra's rotation_grace_period: the other replica's redemption is within the grace, and the session lives on",
  async (t) => {
    // A Hydra of its own: the grace period is a server setting (at most 5 minutes in v2.3). It
    // signs with ES256, which the gateway takes as it takes the other's RS256.
    const graceful = await startHydra(t, { config: { oauth2: { grant: { refresh_token: { rotation_grace_period: '30s' } } } }, signingAlg: 'ES256' })
    const stack = await gateway(t, { at: graceful, replicas: 2 })
    const browser = stack.browser()
    t.equal((await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice', { password: HYDRA_PASSWORD })).status, 200)
    const old = browser.cookieHeader(`${stack.gw}/api/v1/openid/refresh`)
    t.equal((await page(browser, `${stack.gw}/api/v1/openid/refresh`)).status, 200)
    const stale = await fetch(`${stack.replicas[1]?.gw}/api/v1/openid/refresh`, { headers: { cookie: old, accept: 'application/json' } })
    t.equal(stale.status, 200, 'the spent token is still good within the grace period')
    await stale.body?.cancel()
    t.equal((await page(browser, `${stack.gw}/api/v1/openid/refresh`)).status, 200, "and the session's newest token was not revoked")
  },
)

t.test('back-channel logout: Hydra ends the login session and tells the gateway', async (t) => {
  const since = hydra.requests.length
  const alice = await signedIn(t, main, 'alice')
  const sid = String(loginsSince(since)[0]?.session_id)
  t.match(sid, /^[\w-]{8,}$/, 'the login session of the sign-in')
  const bob = await signedIn(t, main, 'bob')
  t.equal((await page(alice, `${main.gw}/x`)).status, 200)

  // Revoking a login session by its sid is Hydra's headless logout: it sends a logout token to
  // every client of that session with a backchannel_logout_uri (the admin API's
  // revokeOAuth2LoginSessions; by subject it would send none).
  await hydra.adminCall('DELETE', `/admin/oauth2/auth/sessions/login?sid=${encodeURIComponent(sid)}`)
  await eventually('the gateway ended the session Hydra ended', async () => (await page(alice, `${main.gw}/x`)).status === 401)
  t.equal((await page(bob, `${main.gw}/x`)).status, 200, "another user's session lives on")
})

t.test('RP-initiated logout: sign-out at Hydra, the logout app, back to postLogoutRedirectUri', async (t) => {
  const since = hydra.requests.length
  const browser = await signedIn(t, main)
  const rt = refreshTokenOf(main, browser.cookieHeader(`${main.gw}/api/v1/openid/refresh`))
  const sid = String(loginsSince(since)[0]?.session_id)

  const res = await browser.fetch(`${main.gw}/api/v1/openid/logout`, { method: 'DELETE', headers: { accept: 'application/json' } })
  t.equal(res.status, 200)
  const { value } = (await res.json()) as { value: string }
  const end = new URL(value)
  t.equal(`${end.origin}${end.pathname}`, `${hydra.issuer}/oauth2/sessions/logout`, "Hydra's end_session_endpoint")
  t.ok(end.searchParams.get('id_token_hint'))
  t.equal(end.searchParams.get('post_logout_redirect_uri'), `${main.gw}/api/v1/openid/sign-out`)
  t.equal((await redeem(rt, 'gateway')).body.error, 'invalid_grant', 'the gateway revoked its refresh token at Hydra')

  const done = await browser.confirmProviderLogout(value)
  const logout = hydra.requests.filter((r) => r.kind === 'logout').at(-1)
  t.equal(logout?.sid, sid, 'the logout app was asked to end the login session of the sign-in')
  t.equal(logout?.rp_initiated, true)
  const back = new URL(done.response.url)
  t.equal(`${back.origin}${back.pathname}`, `${main.gw}/api/v1/openid/sign-out`, 'back at postLogoutRedirectUri')
  t.equal(back.searchParams.get('state'), end.searchParams.get('state'), 'with the state the gateway sent')
  t.equal(done.response.status, 200)

  // Hydra's login session is over: the next sign-in shows the login form again.
  const prompts = browser.prompts.length
  await browser.signIn(`${main.gw}/api/v1/openid/redirect`, 'alice', { password: HYDRA_PASSWORD })
  t.strictSame(browser.prompts.slice(prompts), ['login'])
})

t.test('PAR: Hydra v2.3 has no pushed authorization request endpoint, and `required` is refused', async (t) => {
  const metadata = (await (await fetch(`${hydra.issuer}/.well-known/openid-configuration`)).json()) as Record<string, unknown>
  t.equal(metadata.pushed_authorization_request_endpoint, undefined)
  t.equal(metadata.require_pushed_authorization_requests, undefined)
  t.equal(metadata.token_endpoint_auth_signing_alg_values_supported, undefined, 'nor signing algorithms of client assertions')
  t.equal(metadata.introspection_endpoint, undefined, 'nor an introspection endpoint (it is on the admin API)')
  t.strictSame(metadata.id_token_signing_alg_values_supported, ['RS256'], "the ID tokens of this file's sign-ins are RS256, Hydra's default")
  // `required` is refused, never downgraded to the classic URL; `auto` (the page) uses the
  // classic URL, as the sign-in test shows.
  const lines: string[] = []
  const stack = await gateway(t, {
    provider: { clientId: clientId('par'), pushedAuthorizationRequests: 'required' },
    logStream: { write: (line) => lines.push(line) },
    log: 'warn',
    wait: false,
  })
  await assertRefusedAtDiscovery(t, stack.gw, lines, /pushed_authorization_request_endpoint/)
})

/**
 * What `check --online` says of the client of `stack`'s configuration, `provider` and `server`
 * merged over it: its credentials and redirect URI lines, each as `ok|WARNING|PROBLEM <said>`.
 */
async function probe(stack: Stack, provider: Record<string, unknown> = {}, server: Record<string, unknown> = {}): Promise<Record<string, string>> {
  const config: GatewayConfig = {
    ...stack.config,
    server: { ...stack.config.server, ...server },
    providers: stack.config.providers.map((p) => ({ ...p, ...provider })),
  }
  const [result] = await checkProviders(config, pino({ level: 'silent' }))
  const verdict = (item: string): string => {
    const v = result?.verdicts.find((x) => x.item === item)
    return v === undefined ? 'missing' : `${!v.ok ? 'PROBLEM' : v.cannotTell === true ? 'WARNING' : 'ok'} ${v.said}`
  }
  return { credentials: verdict('client credentials'), redirect: verdict('redirect URI') }
}

t.test('check --online asks Hydra about the client: the secret by a made-up code, the redirect URI by the authorization endpoint (no PAR)', async (t) => {
  const redirectUri = `${main.gw}/api/v1/openid/callback`
  const right = await probe(main)
  // fosite: a code not found is invalid_grant, once the client is authenticated.
  t.equal(right.credentials, 'ok the token endpoint authenticated the client (client_secret_basic) and refused only the made-up code (invalid_grant)')
  // Hydra sends a prompt=none request without a login session back with login_required.
  t.equal(
    right.redirect,
    `ok ${redirectUri} is registered: the authorization endpoint sent a sign-in request with prompt=none back to it (error=login_required)`,
  )

  const wrong = await probe(main, { clientSecret: 'not-the-secret-hydra-knows' })
  t.match(
    wrong.credentials,
    /^PROBLEM the token endpoint refused the client \(invalid_client: Client authentication failed .*, HTTP 401\): sign-ins would fail at the callback\. Check provider\.clientId and provider\.clientSecret, and that the provider registered the client for client_secret_basic \(provider\.clientAuthMethod\)$/,
  )

  // Hydra does not redirect to an unknown redirect URI: it sends the browser to its error page,
  // whose query names the redirect_uri (fosite: "The 'redirect_uri' parameter does not match...").
  const elsewhere = main.gw.replace('127.0.0.1', 'localhost')
  const unknown = await probe(main, {}, { publicUrl: elsewhere })
  t.match(
    unknown.redirect,
    new RegExp(
      `^PROBLEM the authorization endpoint refused ${elsewhere}/api/v1/openid/callback \\(HTTP 30\\d, invalid_request: .*The 'redirect_uri' parameter does not match any of the OAuth 2\\.0 Client's pre-registered redirect urls\\.\\) and did not send the sign-in back to it: register it, exactly so, as a redirect URI of client ${main.config.providers[0]?.clientId ?? ''}$`,
    ),
  )
})

const dir = mkdtempSync(join(tmpdir(), 'ogw-hydra-keys-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const ecKey = join(dir, 'client-ec.pem')
writeFileSync(ecKey, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o400 })

async function jwks(clientKey: string): Promise<{ keys: unknown[] }> {
  const set = await clientJwks({ clientAuthMethod: 'private_key_jwt', clientKey } as ProviderConfig)
  if (set === undefined) throw new Error('no JWKS')
  return set
}

/** A gateway authenticating with private_key_jwt (the EC key), and its client registered with the key's public half. */
async function keyGateway(t: Test, name: string, provider: Record<string, unknown>, client: Record<string, unknown> = {}, lines?: string[]): Promise<Stack> {
  return gateway(t, {
    provider: { clientId: clientId(name), clientSecret: undefined, clientAuthMethod: 'private_key_jwt', clientKey: ecKey, ...provider },
    client: {
      client_secret: undefined,
      token_endpoint_auth_method: 'private_key_jwt',
      token_endpoint_auth_signing_alg: 'ES256',
      jwks: await jwks(ecKey),
      ...client,
    },
    ...(lines === undefined ? {} : { logStream: { write: (line: string) => lines.push(line) }, log: 'warn' }),
  })
}

t.test('private_key_jwt as the page says (clientAssertionAudience: token_endpoint): sign-in, refresh and sign-out authenticate with the key', async (t) => {
  t.equal(pageKeyProvider.clientAuthMethod, 'private_key_jwt')
  const stack = await keyGateway(t, 'pkjwt', { ...pageKeyProvider, clientKey: ecKey })
  t.equal(
    (await probe(stack)).credentials,
    'ok the token endpoint authenticated the client (private_key_jwt) and refused only the made-up code (invalid_grant)',
    'check --online authenticates with the key as sign-ins do',
  )
  const browser = await signedIn(t, stack)
  t.equal((await page(browser, `${stack.gw}/x`)).status, 200)
  t.equal((await page(browser, `${stack.gw}/api/v1/openid/refresh`)).status, 200, 'the refresh grant authenticates the same way')
  const rt = refreshTokenOf(stack, browser.cookieHeader(`${stack.gw}/api/v1/openid/refresh`))
  const introspect = async (): Promise<boolean> =>
    (
      (await (await fetch(`${hydra.admin}/admin/oauth2/introspect`, { method: 'POST', body: new URLSearchParams({ token: rt }) })).json()) as {
        active: boolean
      }
    ).active
  t.equal(await introspect(), true, 'the refresh token is live at Hydra')
  const out = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE', headers: { accept: 'application/json' } })
  t.equal(out.status, 200)
  await out.body?.cancel()
  t.equal(await introspect(), false, 'the revocation at sign-out authenticated too: Hydra revoked the refresh token')
})

t.test('private_key_jwt with the default audience (the issuer): Hydra refuses it, and the gateway says so, never falls back', async (t) => {
  const lines: string[] = []
  const stack = await keyGateway(t, 'pkjwt-issuer', {}, {}, lines)
  t.match(
    (await probe(stack)).credentials,
    /^PROBLEM the token endpoint refused the client \(invalid_client: .*Claim 'audience' from 'client_assertion' must match the authorization server's token endpoint.*, HTTP 401\): sign-ins would fail at the callback\. Check provider\.clientId and provider\.clientKey \(its public key must be the one registered at the provider: openid-gateway jwks prints it; Ory Hydra also needs provider\.clientAssertionAudience: token_endpoint\)$/,
    'check --online says so before anyone signs in',
  )
  const res = await stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice', { password: HYDRA_PASSWORD })
  t.equal(res.status, 502)
  t.equal(await problemCode(res), 'provider_rejected_client')
  const failed = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'code exchange failed')
  t.equal(failed?.error, 'invalid_client')
  t.match(failed?.error_description, /Claim 'audience' from 'client_assertion' must match the authorization server's token endpoint/)
})

t.test('private_key_jwt: a client registered with another algorithm than the key signs with is refused clearly', async (t) => {
  const lines: string[] = []
  // Without token_endpoint_auth_signing_alg Hydra expects RS256; the EC key signs ES256 (Hydra's
  // discovery lists no token_endpoint_auth_signing_alg_values_supported to agree on).
  const stack = await keyGateway(t, 'pkjwt-alg', { clientAssertionAudience: 'token_endpoint' }, { token_endpoint_auth_signing_alg: undefined }, lines)
  const res = await stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice', { password: HYDRA_PASSWORD })
  t.equal(res.status, 502)
  t.equal(await problemCode(res), 'provider_rejected_client')
  const failed = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'code exchange failed')
  t.match(failed?.error_description, /uses signing algorithm 'ES256' but the requested OAuth 2.0 Client enforces signing algorithm 'RS256'/)
})

t.test('the back-channel logout endpoint refuses a logout token Hydra did not sign', async (t) => {
  const res = await fetch(main.gw + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ logout_token: 'e30.e30.' }) })
  t.equal(res.status, 400)
  await res.body?.cancel()
})
