import { generateKeyPairSync, randomUUID } from 'node:crypto'
import t, { type Test } from 'tap'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import type { Clock } from '#src/lib/clock'
import type { Browser } from '../fixtures/browser.ts'
import { manualClock } from '../fixtures/clock.ts'
import { problemCode } from '../fixtures/http.ts'
import { CLIENT_ID, startStack, type Stack } from '../fixtures/stack.ts'

// Two real oidc-provider instances behind one gateway (`providers:`): `staff` and `partners`. The
// root upstream accepts both (staff first: its default), /partners only partners, /staff only
// staff. Both providers invent the same accounts, so `alice` has the same `sub` at each: exactly
// the case where a session or token must be told apart by its provider, not by its subject.
// Accepting every provider is explicit (`providers: ['*']`): an upstream that names none accepts
// the default (first) provider alone.

const UPSTREAMS = [
  { name: 'app', providers: ['*'] },
  { name: 'partner-portal', match: { pathPrefix: '/partners' }, providers: ['partners'] },
  { name: 'staff-tools', match: { pathPrefix: '/staff' }, providers: ['staff'] },
]

async function twoProviders(t: Test, config: Record<string, unknown> = {}, clock?: Clock): Promise<{ stack: Stack; staff: string; partners: string }> {
  const stack = await startStack(t, {
    providers: ['staff', 'partners'],
    upstreams: UPSTREAMS,
    backchannelLogout: true,
    config,
    ...(clock === undefined ? {} : { clock }),
  })
  const [staff, partners] = stack.providers.map((p) => p.issuer) as [string, string]
  return { stack, staff, partners }
}

/** Where the redirect endpoint sends a sign-in: the authorization endpoint's origin, or the problem code. */
async function signInGoesTo(stack: Stack, query: string): Promise<string> {
  const res = await fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=0&${query}`)
  if (res.status !== 200) return `${res.status} ${await problemCode(res)}`
  const { value } = (await res.json()) as { value: string }
  return new URL(value).origin
}

async function status(at: Stack | Browser, browserOrUrl: Browser | string, path = ''): Promise<number> {
  const [browser, url] = typeof browserOrUrl === 'string' ? [at as Browser, browserOrUrl] : [browserOrUrl, `${(at as Stack).gw}${path}`]
  const res = await browser.fetch(url, { headers: { accept: 'application/json' } })
  await res.body?.cancel()
  return res.status
}

async function signIn(stack: Stack, provider: string, username = 'alice'): Promise<Browser> {
  const browser = stack.browser()
  const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect?provider=${provider}`, username)
  t.equal(res.status, 200, `signed in at ${provider}`)
  await res.body?.cancel()
  return browser
}

t.test('the redirect endpoint: provider=<name>, else the default of the upstream the sign-in returns to', async (t) => {
  const { stack, staff, partners } = await twoProviders(t)
  t.equal(await signInGoesTo(stack, ''), staff, 'no redirectAfter: the root upstream, whose default is the first provider')
  t.equal(await signInGoesTo(stack, 'redirectAfter=/partners/home'), partners, "the partner portal's only provider")
  t.equal(await signInGoesTo(stack, 'redirectAfter=/staff/x'), staff)
  t.equal(await signInGoesTo(stack, 'provider=partners'), partners, 'asked for by name')
  t.equal(await signInGoesTo(stack, 'provider=partners&redirectAfter=/page'), partners, 'the root upstream accepts both')
  t.equal(await signInGoesTo(stack, 'provider=nobody'), '400 bad_request', 'an unknown name')
  t.equal(await signInGoesTo(stack, 'provider='), '400 bad_request', 'an empty name')
  t.equal(await signInGoesTo(stack, 'provider=staff&provider=partners'), '400 bad_request', 'given twice')
  t.equal(await signInGoesTo(stack, 'provider=staff&redirectAfter=/partners/home'), '400 bad_request', 'a provider the target upstream does not accept')

  // A navigation to a protected page goes through the redirect endpoint to that upstream's provider.
  const browser = stack.browser()
  const page = await browser.fetch(`${stack.gw}/partners/home`, { navigate: true })
  const location = page.headers.get('location') ?? ''
  t.equal(page.status, 302)
  const start = await browser.fetch(new URL(location, stack.gw), { navigate: true })
  t.equal(new URL(start.headers.get('location') ?? '').origin, partners, 'a navigation to /partners signs in at partners')
})

for (const store of ['cookie', 'memory'] as const)
  t.test(`${store} store: a session records its provider: accepted where that provider is, refreshed and logged out there`, async (t) => {
    const { stack, staff, partners } = await twoProviders(t, { session: { store } })
    const partner = await signIn(stack, 'partners')
    t.same(
      [await status(stack, partner, '/partners/x'), await status(stack, partner, '/'), await status(stack, partner, '/staff/x')],
      [200, 200, 401],
      'partners session: the portal and the root, not the staff tools',
    )
    const employee = await signIn(stack, 'staff')
    t.same(
      [await status(stack, employee, '/partners/x'), await status(stack, employee, '/'), await status(stack, employee, '/staff/x')],
      [401, 200, 200],
      'staff session: the root and the staff tools, not the portal',
    )
    const seen = await employee.fetch(`${stack.gw}/staff/x`, { headers: { accept: 'application/json' } })
    t.equal(((await seen.json()) as { headers: Record<string, string> }).headers['x-forwarded-user'], 'alice')

    // Each refresh token goes to its own provider: the other would refuse it (409).
    for (const [browser, name] of [
      [partner, 'partners'],
      [employee, 'staff'],
    ] as const) {
      const res = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
      t.equal(res.status, 200, `the ${name} session refreshes at ${name}`)
      await res.body?.cancel()
    }

    // Logout: the end-session URL of the session's provider.
    for (const [browser, issuer] of [
      [partner, partners],
      [employee, staff],
    ] as const) {
      const res = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
      t.equal(res.status, 200)
      const { value } = (await res.json()) as { value: string }
      t.equal(new URL(value).origin, issuer, "the session's own provider's end-session")
    }
  })

t.test("a Bearer token's iss selects its provider, among those the upstream accepts", async (t) => {
  const { stack } = await twoProviders(t)
  const [staff, partners] = stack.providers as [NonNullable<Stack['provider']>, NonNullable<Stack['provider']>]
  const call = async (path: string, token: string): Promise<string> => {
    const res = await fetch(`${stack.gw}${path}`, { headers: { accept: 'application/json', authorization: `Bearer ${token}` } })
    if (res.status !== 200) return `${res.status}`
    return ((await res.json()) as { headers: Record<string, string> }).headers['x-forwarded-user'] ?? ''
  }
  const fromStaff = await staff.signJwt({ sub: 'svc-staff', aud: CLIENT_ID, scope: 'api' }, { typ: 'at+jwt' })
  const fromPartners = await partners.signJwt({ sub: 'svc-partner', aud: CLIENT_ID, scope: 'api' }, { typ: 'at+jwt' })
  t.same(
    [await call('/api', fromStaff), await call('/api', fromPartners)],
    ['svc-staff', 'svc-partner'],
    'the root accepts either, each verified by its issuer',
  )
  t.same([await call('/partners/api', fromPartners), await call('/partners/api', fromStaff)], ['svc-partner', '401'], 'the portal: partners only')
  t.same([await call('/staff/api', fromStaff), await call('/staff/api', fromPartners)], ['svc-staff', '401'], 'the staff tools: staff only')

  // Signed by partners' key but claiming staff as its issuer: staff's keys refuse it.
  const forged = await partners.signJwt({ iss: staff.issuer, sub: 'mallory', aud: CLIENT_ID, scope: 'api' }, { typ: 'at+jwt' })
  t.equal(await call('/api', forged), '401', "an iss naming another provider than the signer's")
  const unknown = await partners.signJwt({ iss: 'https://elsewhere.example', sub: 'mallory', aud: CLIENT_ID, scope: 'api' }, { typ: 'at+jwt' })
  t.equal(await call('/api', unknown), '401', 'an iss naming no provider')
})

t.test('back-channel logout: the logout token ends the sessions of its own provider only', async (t) => {
  const clock = manualClock()
  const { stack } = await twoProviders(t, {}, clock)
  const [staff, partners] = stack.providers as [NonNullable<Stack['provider']>, NonNullable<Stack['provider']>]
  const atStaff = await signIn(stack, 'staff')
  const atPartners = await signIn(stack, 'partners')
  t.same([await status(stack, atStaff, '/'), await status(stack, atPartners, '/')], [200, 200])
  // The revocation list counts whole seconds: the logout comes a second after the sign-ins.
  clock.advance(1000)

  const logout = async (provider: typeof staff): Promise<number> => {
    const token = await provider.signJwt({ aud: CLIENT_ID, sub: 'alice', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } }, { typ: 'logout+jwt' })
    const res = await fetch(stack.gw + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ logout_token: token }) })
    await res.body?.cancel()
    return res.status
  }
  t.equal(await logout(partners), 200, "partners' logout token for alice")
  t.same([await status(stack, atStaff, '/'), await status(stack, atPartners, '/')], [200, 401], "alice at staff is another person's session: left alone")
  t.equal(await logout(staff), 200)
  t.equal(await status(stack, atStaff, '/'), 401, "staff's own logout token ends it")

  const foreign = await partners.signJwt(
    { iss: 'https://elsewhere.example', aud: CLIENT_ID, sub: 'alice', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } },
    { typ: 'logout+jwt' },
  )
  const res = await fetch(stack.gw + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ logout_token: foreign }) })
  t.equal(res.status, 400, 'a logout token from no configured provider')
  t.match(await res.json(), { error: 'invalid_request', error_description: /iss names no configured provider/ })
})

t.test('a session of a provider no longer configured (renamed or removed) is no session; refresh ends it, logout clears it', async (t) => {
  const { stack } = await twoProviders(t)
  // A gateway with the same cookie secrets that knows one provider, named default.
  const single = await startStack(t)
  const partner = await signIn(stack, 'partners')
  t.equal(await status(stack, partner, '/'), 200)
  t.equal(await status(partner, single.gw + '/'), 401, 'not signed in there')
  const refresh = await partner.fetch(`${single.gw}/api/v1/openid/refresh`)
  t.equal(refresh.status, 409, 'its refresh token cannot be redeemed: 409')
  t.equal(await problemCode(refresh), 'refresh_token_invalid')
  t.equal(partner.cookie('ogw'), undefined, 'and the session cookies are cleared')

  const again = await signIn(stack, 'partners')
  const logout = await again.fetch(`${single.gw}/api/v1/openid/logout`, { method: 'DELETE' })
  t.equal(logout.status, 200, 'logout works')
  t.same(await logout.json(), { value: '' }, 'without a provider to send the browser to')
  t.equal(again.cookie('ogw'), undefined, 'cookies cleared')
})

t.test(
  "users of different providers are told apart upstream: default provider only unless '*', allow rules per provider, the issuer in the headers and the assertion",
  async (t) => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const stack = await startStack(t, {
      providers: ['staff', 'partners'],
      upstreams: [
        // No providers: the default (staff) alone.
        { name: 'legacy', match: { pathPrefix: '/legacy' } },
        // Both providers, a group rule without allow.providers: the rule admits staff only.
        { name: 'admin', match: { pathPrefix: '/admin' }, providers: ['*'], allow: { groups: ['admins'] } },
        // The same rule, said to hold for every provider.
        { name: 'shared-admin', match: { pathPrefix: '/shared-admin' }, providers: ['*'], allow: { groups: ['admins'], providers: ['*'] } },
        { name: 'app', providers: ['*'], identityAssertion: true },
      ],
      config: { assertions: { signingKeys: [privateKey.export({ format: 'pem', type: 'pkcs8' }).toString()] } },
    })
    const [staff, partners] = stack.providers.map((p) => p.issuer) as [string, string]
    const atStaff = await signIn(stack, 'staff')
    const atPartners = await signIn(stack, 'partners')
    t.same(
      [await status(stack, atStaff, '/legacy/x'), await status(stack, atPartners, '/legacy/x')],
      [200, 401],
      'an upstream without providers: the default provider only',
    )
    t.same(
      [await status(stack, atStaff, '/admin/x'), await status(stack, atPartners, '/admin/x')],
      [200, 403],
      "alice in admins at partners is not staff's alice in admins",
    )
    t.same([await status(stack, atStaff, '/shared-admin/x'), await status(stack, atPartners, '/shared-admin/x')], [200, 200], "allow.providers: ['*']")

    for (const [browser, issuer] of [
      [atStaff, staff],
      [atPartners, partners],
    ] as const) {
      const res = await browser.fetch(`${stack.gw}/page`, { headers: { accept: 'application/json', 'x-forwarded-issuer': 'https://forged.example' } })
      const { headers } = (await res.json()) as { headers: Record<string, string> }
      t.equal(headers['x-forwarded-user'], 'alice', 'the same sub')
      t.equal(headers['x-forwarded-issuer'], issuer, "X-Forwarded-Issuer is the user's provider (a client's own is dropped)")
      const assertion = headers['x-identity-assertion'] ?? ''
      const payload = JSON.parse(Buffer.from(assertion.split('.')[1] ?? '', 'base64url').toString()) as Record<string, unknown>
      t.equal(payload.idp, issuer, "the assertion's idp claim is the user's provider")
      t.equal(payload.iss, stack.gw, 'its iss stays the gateway')
    }

    // Forward-auth carries the issuer too.
    const check = await fetch(`${stack.gw}/api/v1/openid/auth`, {
      headers: {
        'x-original-url': `${stack.gw}/page`,
        'x-original-method': 'GET',
        cookie: atPartners.cookieHeader(`${stack.gw}/page`),
        accept: 'application/json',
      },
    })
    t.equal(check.status, 200, `forward-auth: ${check.status}`)
    t.equal(check.headers.get('x-auth-request-issuer'), partners, 'X-Auth-Request-Issuer')
  },
)
