import { readFileSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import t from 'tap'
import * as jose from 'jose'
import YAML from 'yaml'
import { launch, submitProviderForm } from '../fixtures/chromium.ts'
import { Browser } from '../fixtures/browser.ts'
import { keycloakSignIn, startKeycloak, type Keycloak } from '../fixtures/keycloak.ts'
import { ROOT, recipe } from '../fixtures/markdown.ts'
import { rawRequest } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { CLIENT_SECRET, refreshTokenOf, reservePort, startStack, type Stack } from '../fixtures/stack.ts'
import pino from 'pino'
import { SIGN_OUT_PATH } from '#src/contract/endpoints'
import { checkProviders } from '#src/oidc/provider-support'
import type { GatewayConfig } from '#src/options/types'

// docs/providers/keycloak.md run against a real Keycloak (the quarkus distribution in development
// mode, test/fixtures/keycloak.ts), started once for every scenario of this file: the realm is the
// page's JSON block, imported at start (`--import-realm`, its `${OIDC_CLIENT_SECRET}` from Keycloak's
// environment), with this test's users, one API client and Keycloak's event store added; the gateways run
// config/providers/keycloak.yaml (the page's recipe) and, for roles, the page's YAML block over it.
// The only changes to what the page shows are those a loopback test needs: the gateways' and
// Keycloak's http://127.0.0.1 origins for https://app.example.com and the issuer host, the echo
// upstream for the recipe's targets, the stack's cookie secret, and a longer provider timeout
// (a Keycloak starting up on a loaded 2-core machine can take seconds for a first token request).

const PAGE = 'docs/providers/keycloak.md'
const REALM = 'main'
const CLIENT_ID = 'gateway'
const PASSWORD = 'correct horse battery staple'
const EXAMPLE = 'https://app.example.com'
/**
 * Keycloak answers in about 25 s on an idle 2-core machine; measured 73 s to 155 s on one whose
 * load average was 10 to 16 (the slowest with its dev-mode build, which a later run reuses), and
 * the whole file 105 s to 190 s there.
 */
t.setTimeout(300_000)

type Json = Record<string, unknown>

const realmPage = recipe(PAGE, 'json')
const rolesPage = YAML.parse(recipe(PAGE, 'yaml')) as { provider: Json; upstreams: Json[] }
const recipeText = readFileSync(`${ROOT}config/providers/keycloak.yaml`, 'utf8')

/** The recipe as the stack takes it: its provider settings and upstreams; the stack owns server, cookies and targets. */
function recipeConfig(issuer: string): { config: Json; upstreams: Json[] } {
  const raw = YAML.parse(recipeText) as { server: { publicUrl: string }; provider: Json; upstreams: Json[] }
  const { issuer: _issuer, clientSecret: _secret, postLogoutRedirectUri, ...provider } = raw.provider
  if (postLogoutRedirectUri !== `${raw.server.publicUrl}${SIGN_OUT_PATH}`)
    throw new Error('the recipe returns from the provider elsewhere than the sign-out page')
  const upstreams = raw.upstreams.map(({ target: _target, ...u }) => u)
  return {
    config: {
      provider: { ...provider, issuer, clientSecret: CLIENT_SECRET, timeoutMs: 10_000 },
      log: { level: 'info' },
    },
    upstreams,
  }
}

/** The page's realm for these gateways, plus the test's users and an API client without the Audience mapper. */
function realmFor(gateways: string[]): Json {
  const realm = JSON.parse(realmPage) as Json & { clients: Json[] }
  const gateway = realm.clients.find((c) => c.clientId === CLIENT_ID) as Json & { redirectUris: string[]; attributes: Record<string, string> }
  const first = gateways[0] as string
  // Every gateway signs in and comes back; back-channel logout goes to the first one (one URL per client).
  gateway.redirectUris = gateways.flatMap((gw) => gateway.redirectUris.map((uri) => uri.replace(EXAMPLE, gw)))
  gateway.attributes['post.logout.redirect.uris'] = gateways.map((gw) => gateway.attributes['post.logout.redirect.uris']?.replace(EXAMPLE, gw)).join('##')
  gateway.attributes['backchannel.logout.url'] = gateway.attributes['backchannel.logout.url']!.replace(EXAMPLE, first)
  const reportsJob = realm.clients.find((c) => c.clientId === 'reports-job') as Json
  const { protocolMappers: _mappers, ...withoutAudience } = reportsJob
  realm.clients.push({ ...withoutAudience, clientId: 'no-audience-job' })
  const user = (username: string, firstName: string, groups: string[], realmRoles: string[], clientRoles: Record<string, string[]>): Json => ({
    username,
    enabled: true,
    email: `${username}@example.com`,
    emailVerified: true,
    firstName,
    lastName: 'Example',
    credentials: [{ type: 'password', value: PASSWORD, temporary: false }],
    groups,
    realmRoles: ['default-roles-main', ...realmRoles],
    clientRoles,
  })
  realm.users = [user('alice', 'Alice', ['/admins'], ['app-admin'], { gateway: ['editor'] }), user('bob', 'Bob', ['/staff/support'], [], {})]
  // Keycloak's event store shows the introspections the gateway made.
  realm.eventsEnabled = true
  realm.enabledEventTypes = ['INTROSPECT_TOKEN', 'INTROSPECT_TOKEN_ERROR', 'REFRESH_TOKEN', 'REFRESH_TOKEN_ERROR']
  return realm
}

interface Gateway {
  stack: Stack
  lines: string[]
}

async function gateway(issuer: string, config: Json, upstreams: Json[]): Promise<Gateway> {
  const lines: string[] = []
  const stack = await startStack(t, {
    issuer,
    waitForProvider: false,
    postLogoutPath: SIGN_OUT_PATH,
    config,
    upstreams,
    logStream: { write: (line: string) => void lines.push(line) },
  })
  return { stack, lines }
}

const kcPort = await reservePort()
const issuer = `http://127.0.0.1:${kcPort.port}/realms/${REALM}`
const groupsRecipe = recipeConfig(issuer)
/** config/providers/keycloak.yaml: groups from the Group Membership mapper. */
const groupsGw = await gateway(issuer, groupsRecipe.config, groupsRecipe.upstreams)
/** The page's roles block over the recipe, and introspection on. */
const rolesGw = await gateway(
  issuer,
  { ...groupsRecipe.config, provider: { ...(groupsRecipe.config.provider as Json), ...rolesPage.provider, bearer: { introspection: true } } },
  rolesPage.upstreams.map(({ target: _target, ...u }) => u),
)
const kc: Keycloak = await startKeycloak(t, {
  realms: [realmFor([groupsGw.stack.gw, rolesGw.stack.gw])],
  env: { OIDC_CLIENT_SECRET: CLIENT_SECRET },
  port: kcPort,
})
t.comment(`Keycloak ${kc.cachedBuild ? 'from the kept dev-mode build' : 'with its dev-mode build'} answered after ${kc.startMs} ms`)
// The gateways kept retrying discovery while Keycloak started (backing off up to 30 s): a reload
// discovers at once.
for (const gw of [groupsGw, rolesGw]) {
  if (!(await gw.stack.live.reload('SIGHUP'))) throw new Error(`the gateway did not reload:\n${gw.lines.join('\n')}`)
  await gw.stack.app.providersReady
}

/** The headers the echo upstream received with the last request. */
function lastAtApp(stack: Stack): Record<string, unknown> {
  const last = stack.upstream.requests.at(-1)
  if (last === undefined) throw new Error('nothing reached the application')
  return last.headers
}

function claimsOf(jwt: string): Json {
  return jose.decodeJwt(jwt) as Json
}

async function userId(username: string): Promise<string> {
  const [user] = await kc.adminJson<Array<{ id: string }>>(`/realms/${REALM}/users?exact=true&username=${username}`)
  if (user === undefined) throw new Error(`no user ${username}`)
  return user.id
}

async function sessionsOf(username: string): Promise<Array<{ id: string }>> {
  return kc.adminJson(`/realms/${REALM}/users/${await userId(username)}/sessions`)
}

/** A token of a client's service account, with the secret Keycloak generated for the client at import. */
async function clientCredentials(clientId: string): Promise<string> {
  const [client] = await kc.adminJson<Array<{ id: string }>>(`/realms/${REALM}/clients?clientId=${clientId}`)
  const { value: secret } = await kc.adminJson<{ value?: string }>(`/realms/${REALM}/clients/${client?.id}/client-secret`)
  if (secret === undefined) throw new Error(`Keycloak generated no secret for ${clientId}`)
  const res = await fetch(`${issuer}/protocol/openid-connect/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}` },
    body: new URLSearchParams({ grant_type: 'client_credentials' }),
  })
  const body = (await res.json()) as { access_token?: string }
  if (res.status !== 200 || body.access_token === undefined) throw new Error(`no token for ${clientId}: ${res.status} ${JSON.stringify(body)}`)
  return body.access_token
}

/** A scripted browser signed in at `gw` through Keycloak's login form. */
async function signedIn(gw: Gateway, username: string): Promise<Browser> {
  const browser = new Browser()
  const done = await keycloakSignIn(browser, `${gw.stack.gw}/page`, username, PASSWORD)
  if (done.response.status !== 200 || !done.loginForm) {
    throw new Error(`sign-in as ${username} ended with ${done.response.status} at ${done.response.url}: ${(await done.response.text()).slice(0, 300)}`)
  }
  await done.response.body?.cancel()
  return browser
}

function audit(gw: Gateway, kind: string): Json[] {
  return gw.lines.map((line) => JSON.parse(line) as Json).filter((l) => l.audit === kind)
}

t.test("a person signs in through Keycloak's login page in Chromium; groups come from the Group Membership mapper", async (t) => {
  const browser = await launch()
  t.teardown(() => browser.close())
  const page = await browser.newPage()
  const { gw } = groupsGw.stack

  await page.goto(`${gw}/admin/reports?from=test`)
  t.equal(new URL(page.url()).origin, kc.url, "sent to Keycloak's login page")
  t.ok(await page.locator('#kc-form-login').count(), "Keycloak's login form")
  await submitProviderForm(page, { username: 'alice', password: PASSWORD })
  await page.waitForURL(`${gw}/admin/reports?from=test`)
  const echoed = JSON.parse((await page.textContent('body')) ?? '') as { headers: Record<string, string> }
  t.equal(echoed.headers['x-forwarded-groups'], '/admins', 'full group path, as the mapper sends it')
  t.equal(echoed.headers['x-forwarded-email'], 'alice@example.com')
  t.equal(echoed.headers['x-forwarded-user'], await userId('alice'), "the user is Keycloak's sub")
  t.equal(echoed.headers['x-forwarded-preferred-username'], 'alice')

  // bob is in /staff/support only: /admin refuses him.
  const bobPage = await (await browser.newContext()).newPage()
  await bobPage.goto(`${gw}/admin/reports`)
  await submitProviderForm(bobPage, { username: 'bob', password: PASSWORD })
  t.equal(bobPage.url(), `${gw}/admin/reports`)
  t.match(await bobPage.textContent('.who'), 'Signed in as', 'the refusal page')
  const bobEcho = await bobPage.goto(`${gw}/page`)
  t.equal(bobEcho?.status(), 200)
  t.equal(((await bobEcho?.json()) as { headers: Record<string, string> }).headers['x-forwarded-groups'], '/staff/support', 'a subgroup by its full path')

  t.test('RP-initiated logout: the sign-out button ends the Keycloak session too', async (t) => {
    // A second application in the same SSO session (Keycloak's account console): the gateway's
    // sign-out revokes its own refresh token first (RFC 7009), which ends only the gateway's part
    // of the SSO session at Keycloak; the end-session request is what ends the rest.
    // The console is a script that signs in by its own code flow: its page loads, redirects to
    // Keycloak's authorization endpoint and comes back with ?code=. Keycloak lists the console in
    // the session when it issues the code, before that last navigation ends, and a goto started
    // then is interrupted by it: wait for the navigation that brings the code back.
    const landed = page.waitForURL((url) => url.pathname.endsWith('/account') && url.searchParams.has('code'))
    await page.goto(`${issuer}/account`)
    await landed
    const [session] = await eventually('alice signed in to the account console too', async () => {
      const sessions = await kc.adminJson<Array<{ id: string; clients: Record<string, string> }>>(`/realms/${REALM}/users/${await userId('alice')}/sessions`)
      return sessions.length === 1 && Object.values(sessions[0]?.clients ?? {}).includes('account-console') ? sessions : undefined
    })
    t.same(Object.values(session?.clients ?? {}).toSorted(), ['account-console', CLIENT_ID], 'one SSO session, two applications')
    await page.goto(`${gw}${SIGN_OUT_PATH}`)
    await Promise.all([
      page.waitForURL((url) => url.href.startsWith(`${gw}${SIGN_OUT_PATH}`) && url.search !== ''),
      page.click('text=Sign out / switch account'),
    ])
    t.match(await page.textContent('h1'), 'You are signed out', "back on the gateway's page, through Keycloak's end-session")
    t.same(await sessionsOf('alice'), [], 'Keycloak ended the SSO session')
    await page.goto(`${gw}/page`)
    t.equal(new URL(page.url()).origin, kc.url)
    t.ok(await page.locator('#kc-form-login').count(), 'signing in again asks for the password')
  })

  t.test("signing out at Keycloak itself: its back-channel logout ends bob's gateway session", async (t) => {
    const before = audit(groupsGw, 'backchannel-logout').length
    // Keycloak's own end-session page, as another application or the account console sends the user there.
    await bobPage.goto(`${issuer}/protocol/openid-connect/logout`)
    await Promise.all([bobPage.waitForNavigation(), bobPage.click('#kc-logout')])
    t.same(await sessionsOf('bob'), [], 'Keycloak ended the SSO session')
    t.match(audit(groupsGw, 'backchannel-logout').slice(before), [{ outcome: 'success', sub: await userId('bob') }], 'and told the gateway')
    await bobPage.goto(`${gw}/page`)
    t.equal(new URL(bobPage.url()).origin, kc.url, 'the gateway session is over: the page goes through sign-in')
    t.ok(await bobPage.locator('#kc-form-login').count())
  })
})

t.test('realm roles and client roles through groupsClaim reach allow.groups and X-Forwarded-Groups', async (t) => {
  const { stack } = rolesGw
  const alice = await signedIn(rolesGw, 'alice')
  const res = await alice.fetch(`${stack.gw}/page`)
  t.equal(res.status, 200, 'alice has the realm role app-admin')
  const headers = lastAtApp(stack)
  t.equal(headers['x-forwarded-user'], 'alice', 'userClaim: preferred_username')
  const groups = String(headers['x-forwarded-groups']).split(',').toSorted()
  t.same(groups, ['app-admin', 'default-roles-main', 'offline_access', 'uma_authorization'], 'the realm roles, default ones included')

  const bob = await keycloakSignIn(new Browser(), `${stack.gw}/page`, 'bob', PASSWORD)
  t.equal(bob.response.status, 403, 'bob, without the role, is refused at the end of his sign-in')

  t.test('client roles: groupsClaim resource_access.gateway.roles', async (t) => {
    stack.replicas[0]!.rewrite((c) => {
      const provider = c.provider as Json
      const upstreams = c.upstreams as Array<Json & { allow: Json }>
      return {
        ...c,
        provider: { ...provider, groupsClaim: 'resource_access.gateway.roles' },
        upstreams: upstreams.map((u) => ({ ...u, allow: { groups: ['editor'] } })),
      }
    })
    t.ok(await stack.live.reload('SIGHUP'))
    const again = await signedIn(rolesGw, 'alice')
    t.equal((await again.fetch(`${stack.gw}/page`)).status, 200)
    t.equal(lastAtApp(stack)['x-forwarded-groups'], 'editor', "the gateway client's role")
  })
})

t.test('refresh with rotation: the gateway never presents a spent refresh token; a replay ends the client session at Keycloak', async (t) => {
  const { stack } = groupsGw
  const browser = await signedIn(groupsGw, 'alice')
  const refreshUrl = `${stack.gw}/api/v1/openid/refresh`
  const cookies = (): string => browser.cookieHeader(refreshUrl)
  const refreshEvents = async (type: string): Promise<number> =>
    (await kc.adminJson<Json[]>(`/realms/${REALM}/events?type=${type}&client=${CLIENT_ID}&user=${await userId('alice')}`)).length
  const staleCookies = cookies()
  const first = refreshTokenOf(stack, staleCookies)
  t.equal(claimsOf(first).typ, 'Refresh', 'an ordinary refresh token, not an offline one: no offline_access asked')
  // Keycloak tells a spent refresh token by its issue time against the client session's last
  // refresh, in whole seconds: one spent within the second it was issued in still passes.
  const issued = Number(claimsOf(first).iat)
  await eventually('the second after the sign-in', () => Math.floor(Date.now() / 1000) > issued, 2000)

  t.equal((await browser.fetch(refreshUrl)).status, 200)
  const second = refreshTokenOf(stack, cookies())
  t.not(second, first, 'Keycloak rotated the refresh token, and the session keeps the new one')

  // A request still carrying the cookies of before the refresh (sent before the browser got the
  // new ones) is answered with that refresh: Keycloak never sees the spent token.
  const errorsBefore = await refreshEvents('REFRESH_TOKEN_ERROR')
  const late = await rawRequest(stack.gw, '/api/v1/openid/refresh', { headers: { cookie: staleCookies } })
  t.equal(late.status, 200, 'the stale cookies get the result of the refresh already made')
  t.equal(await refreshEvents('REFRESH_TOKEN_ERROR'), errorsBefore, 'no refused refresh at Keycloak')
  t.equal((await browser.fetch(refreshUrl)).status, 200, "the session's newer refresh token works")
  const third = refreshTokenOf(stack, cookies())
  t.not(third, second)

  // Someone else redeeming a spent refresh token (a copy of an old cookie, after the grace):
  // Keycloak refuses it and ends this client's part of the SSO session (TokenManager's
  // validateTokenReuseForRefresh detaches the client session), so the newest token dies too.
  const reuse = await fetch(`${issuer}/protocol/openid-connect/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString('base64')}` },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: first }),
  })
  t.equal(reuse.status, 400, 'the spent refresh token is refused')
  t.match(await reuse.json(), { error: 'invalid_grant', error_description: 'Stale token' })
  const ended = await browser.fetch(refreshUrl, { headers: { accept: 'application/json' } })
  t.equal(ended.status, 409, "the session's refresh is refused in turn: Keycloak ended the client session")
  t.match(await ended.json(), { code: 'refresh_token_invalid' })
  t.equal((await browser.fetch(`${stack.gw}/page`)).status, 401, 'the gateway session is over')
  const back = await keycloakSignIn(browser, `${stack.gw}/page`, 'alice', PASSWORD)
  t.equal(back.response.status, 200)
  t.notOk(back.loginForm, 'the SSO session lives on: the next sign-in needs no password')
})

t.test("back-channel logout: Keycloak's logout token ends the gateway session when the Keycloak session ends", async (t) => {
  const { stack } = groupsGw
  const bob = await signedIn(groupsGw, 'bob')
  const alice = await signedIn(groupsGw, 'alice')
  t.equal((await bob.fetch(`${stack.gw}/page`)).status, 200)
  const before = audit(groupsGw, 'backchannel-logout').length

  // The Keycloak session of this sign-in (bob has another one, from another test): its sid.
  const sid = claimsOf(refreshTokenOf(stack, bob.cookieHeader(`${stack.gw}/api/v1/openid/refresh`))).sid
  t.ok(
    (await sessionsOf('bob')).some((s) => s.id === sid),
    'the sid of the Keycloak session',
  )
  const ended = await kc.admin(`/realms/${REALM}/sessions/${String(sid)}`, { method: 'DELETE' })
  t.equal(ended.status, 204, 'an administrator ends the Keycloak session')
  await eventually('the gateway refusing the ended session', async () => (await bob.fetch(`${stack.gw}/page`)).status === 401).catch((err: unknown) => {
    throw new Error(`${String(err)}\ngateway:\n${groupsGw.lines.slice(-20).join('\n')}\nKeycloak:\n${kc.log().split('\n').slice(-30).join('\n')}`)
  })
  const logged = audit(groupsGw, 'backchannel-logout').slice(before)
  t.match(logged, [{ outcome: 'success', sub: await userId('bob') }], "Keycloak's logout token, accepted")
  t.equal((await alice.fetch(`${stack.gw}/page`)).status, 200, "another user's session goes on")
})

t.test('Bearer tokens of a service account: accepted with the gateway in their audience, refused without', async (t) => {
  const { stack } = groupsGw
  const token = await clientCredentials('reports-job')
  const claims = claimsOf(token)
  t.match(claims, { typ: 'Bearer', azp: 'reports-job' })
  t.ok([claims.aud].flat().includes(CLIENT_ID), 'the Audience mapper put the gateway in aud')
  const ok = await fetch(`${stack.gw}/page`, { headers: { authorization: `Bearer ${token}` } })
  t.equal(ok.status, 200)
  t.equal(lastAtApp(stack)['x-forwarded-user'], claims.sub, 'the service account')
  const admin = await fetch(`${stack.gw}/admin/x`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } })
  t.equal(admin.status, 403, 'a service account has no groups')

  const bare = await clientCredentials('no-audience-job')
  t.same([claimsOf(bare).aud].flat(), ['account'], 'without the mapper: aud is account (the default roles), not the gateway')
  const refused = await fetch(`${stack.gw}/page`, { headers: { authorization: `Bearer ${bare}` } })
  t.equal(refused.status, 401)
  t.match(refused.headers.get('www-authenticate'), /error="invalid_token"/)
})

t.test("introspection: a token that is not a JWT goes to Keycloak's introspection endpoint; Keycloak's JWTs never do", async (t) => {
  const { stack } = rolesGw
  const events = async (): Promise<Json[]> => kc.adminJson(`/realms/${REALM}/events?type=INTROSPECT_TOKEN&type=INTROSPECT_TOKEN_ERROR&client=${CLIENT_ID}`)
  const before = (await events()).length
  const opaque = randomBytes(24).toString('base64url')
  const res = await fetch(`${stack.gw}/page`, { headers: { authorization: `Bearer ${opaque}` } })
  t.equal(res.status, 401)
  t.match(res.headers.get('www-authenticate'), /error="invalid_token"/)
  const asked = await eventually('Keycloak recording the introspection', async () => ((await events()).length > before ? events() : undefined))
  t.equal(asked.length, before + 1, 'the gateway asked Keycloak, once')
  t.match(asked[0], { type: 'INTROSPECT_TOKEN', clientId: CLIENT_ID }, 'as the gateway client, which Keycloak let introspect')
  t.notMatch(rolesGw.lines.join('\n'), /introspection failed|invalid_client/, 'authenticated as the gateway client')

  const jwt = await clientCredentials('reports-job')
  const verified = await fetch(`${stack.gw}/page`, { headers: { authorization: `Bearer ${jwt}`, accept: 'application/json' } })
  t.equal(verified.status, 403, 'verified by the gateway (signed in), then refused by allow.groups')
  t.equal((await events()).length, before + 1, 'not sent to Keycloak')
})

t.test('check --online asks Keycloak about the client: the secret by a made-up code, the redirect URI by a pushed authorization request', async (t) => {
  const { config } = groupsGw.stack
  /** The verdicts on the client of the recipe's gateway, `provider` and `server` merged over its configuration. */
  const probe = async (provider: Json = {}, server: Json = {}): Promise<Record<string, string>> => {
    const changed: GatewayConfig = { ...config, server: { ...config.server, ...server }, providers: config.providers.map((p) => ({ ...p, ...provider })) }
    const [result] = await checkProviders(changed, pino({ level: 'silent' }))
    const verdict = (item: string): string => {
      const v = result?.verdicts.find((x) => x.item === item)
      return v === undefined ? 'missing' : `${!v.ok ? 'PROBLEM' : v.cannotTell === true ? 'WARNING' : 'ok'} ${v.said}`
    }
    return { credentials: verdict('client credentials'), redirect: verdict('redirect URI') }
  }
  const redirectUri = `${groupsGw.stack.gw}/api/v1/openid/callback`
  const right = await probe()
  // AuthorizationCodeGrantType: "Code not valid", after the client authenticated.
  t.equal(right.credentials, 'ok the token endpoint authenticated the client (client_secret_basic) and refused only the made-up code (invalid_grant)')
  t.equal(
    right.redirect,
    `ok ${redirectUri} is registered: the provider accepted a pushed authorization request for it (its request_uri is never used and expires by itself)`,
  )

  const wrong = await probe({ clientSecret: 'not-the-secret-keycloak-knows' })
  t.equal(
    wrong.credentials,
    'PROBLEM the token endpoint refused the client (unauthorized_client: Invalid client or Invalid client credentials, HTTP 401): sign-ins would fail at the callback. Check provider.clientId and provider.clientSecret, and that the provider registered the client for client_secret_basic (provider.clientAuthMethod), and that the client may use the authorization code grant',
  )
  // The pushed request is refused with the credentials; Keycloak's authorization endpoint sends a
  // prompt=none request without a session back with login_required.
  t.equal(
    wrong.redirect,
    `ok ${redirectUri} is registered: the authorization endpoint sent a sign-in request with prompt=none back to it (error=login_required)`,
  )

  // ParEndpoint: invalid_request "Invalid parameter: redirect_uri".
  const elsewhere = groupsGw.stack.gw.replace('127.0.0.1', 'localhost')
  const unknown = await probe({}, { publicUrl: elsewhere })
  t.equal(
    unknown.redirect,
    `PROBLEM the provider refused ${elsewhere}/api/v1/openid/callback in a pushed authorization request (invalid_request: Invalid parameter: redirect_uri): register it, exactly so, as a redirect URI of client ${CLIENT_ID}`,
  )
})

t.test('PAR with a redirect URI Keycloak does not know: 502 provider_rejected_redirect_uri naming it, never "cannot be reached"', async (t) => {
  // Another gateway on another port: its callback is not among the client's redirect URIs.
  const unregistered = await gateway(
    issuer,
    { ...groupsRecipe.config, provider: { ...(groupsRecipe.config.provider as Json), pushedAuthorizationRequests: 'required' } },
    groupsRecipe.upstreams,
  )
  await unregistered.stack.app.providersReady
  const sent = `${unregistered.stack.gw}/api/v1/openid/callback`
  const res = await fetch(`${unregistered.stack.gw}/api/v1/openid/redirect`)
  t.equal(res.status, 502)
  t.match(await res.json(), {
    code: 'provider_rejected_redirect_uri',
    redirectUri: sent,
    detail: `the OpenID provider refused the gateway's redirect URI ${sent} (invalid_request): it must be registered at the provider as a redirect URI of client "${CLIENT_ID}", exactly`,
  })
  const line = unregistered.lines.map((l) => JSON.parse(l) as Json).find((l) => l.call === 'par')
  // Keycloak 26's ParEndpoint: 400 invalid_request "Invalid parameter: redirect_uri".
  t.match(line, {
    problem: 'provider_rejected_redirect_uri',
    status: 400,
    error: 'invalid_request',
    error_description: /redirect_uri/,
    url: /\/ext\/par\/request$/,
  })
})

t.test('every logout token Keycloak sent in this run was accepted', async (t) => {
  const outcomes = [...audit(groupsGw, 'backchannel-logout'), ...audit(rolesGw, 'backchannel-logout')].map((l) =>
    `${String(l.outcome)} ${String(l.reason ?? '')}`.trim(),
  )
  t.ok(outcomes.length >= 2, `Keycloak sent ${outcomes.length}`)
  t.same(
    outcomes.filter((o) => o !== 'success'),
    [],
    'none refused',
  )
})
