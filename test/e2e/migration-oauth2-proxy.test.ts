import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { stringify, parse as parseYaml } from 'yaml'
import { LiveGateway } from '#src/runtime/live'
import { Browser, parseForms, parseSetCookie } from '../fixtures/browser.ts'
import { rawRequest } from '../fixtures/http.ts'
import { recipe, ROOT } from '../fixtures/markdown.ts'
import { startNginx } from '../fixtures/nginx.ts'
import { startOAuth2Proxy, type OAuth2Proxy } from '../fixtures/oauth2-proxy.ts'
import { eventually } from '../fixtures/poll.ts'
import { startTestProvider, type DevProvider, type DevProviderOptions } from '../fixtures/provider.ts'
import { freePort, reservePort, type Reservation } from '../fixtures/stack.ts'
import { startEchoUpstream, type RecordedRequest } from '../fixtures/upstream.ts'

// docs/migrating-from-oauth2-proxy.md, executed: the real oauth2-proxy (v7.15.6, .ci/peers) and
// the gateway side by side, against one development provider and one echo upstream, each
// configured as the page says: oauth2-proxy with the page's command line and the flags of a
// scenario, the gateway with the page's YAML and the keys the page maps those flags to. For each
// scenario the test measures the same things on both sides (what the application receives, what
// a browser and an API client see) and writes them down under a key. Every key whose two
// measurements differ must be a row of the page's table "Differences measured beside
// oauth2-proxy v7.15.6", with the two measurements as the row shows them; a row whose difference
// the test did not measure fails the test too. What both must do whatever the table says (the
// sign-in lands on the deep link, the user reaches the application, ...) is asserted on its own.
// MIGRATION_PRINT=1 prints every measurement as a row of that table, the same ones marked `same`.

const PAGE = 'docs/migrating-from-oauth2-proxy.md'
const TABLE_HEADING = '## Differences measured beside oauth2-proxy v7.15.6'
const CLIENT_SECRET = 'migration-client-secret-0123456789'
// oauth2-proxy takes 16, 24 or 32 bytes, the gateway 32 or more: 32 suits both.
const COOKIE_SECRET = 'migration-cookie-secret-32-bytes'

t.setTimeout(110_000)

// ---------------------------------------------------------------------------------------------
// What was measured, and the page's table.

const measured = new Map<string, { o2p: string; gw: string }>()
let placeholders: Array<[string, string]> = []

/** A measurement written as the table shows it: origins as placeholders, tokens and times elided. */
function show(value: unknown): string {
  let text = typeof value === 'string' ? value : JSON.stringify(value)
  for (const [from, to] of placeholders) text = text.replaceAll(from, to)
  return text.replaceAll('|', '/')
}

function measure(key: string, o2p: unknown, gw: unknown): void {
  if (measured.has(key)) throw new Error(`measured twice: ${key}`)
  measured.set(key, { o2p: show(o2p), gw: show(gw) })
}

/**
 * What both must do, whatever the table says: the behaviour a migration relies on, which a defect
 * both shared would break without making a difference.
 */
function expectBoth(t: Test, key: string, expected: string): void {
  const got = measured.get(key)
  t.equal(got?.o2p, expected, `oauth2-proxy: ${key}`)
  t.equal(got?.gw, expected, `the gateway: ${key}`)
}

interface Row {
  key: string
  o2p: string
  gw: string
}

/** The rows of the page's table: `key` | `oauth2-proxy's` | `the gateway's` | why. */
function tableRows(text: string): Row[] {
  const start = text.indexOf(`\n${TABLE_HEADING}\n`)
  if (start < 0) throw new Error(`${PAGE} has no section "${TABLE_HEADING}"`)
  const section = text.slice(start + TABLE_HEADING.length + 2).split(/\n## /)[0] ?? ''
  const rows: Row[] = []
  for (const line of section.split('\n')) {
    if (!line.startsWith('| `')) continue
    const cells = line.split(' | ').map((c) => c.replace(/^\| /, '').trim())
    const code = (cell: string | undefined): string => {
      const m = /^`([^`]*)`$/.exec(cell ?? '')
      if (m === null) throw new Error(`${PAGE}: a cell of the measured table is not one code span: ${cell} in ${line}`)
      return m[1] as string
    }
    rows.push({ key: code(cells[0]), o2p: code(cells[1]), gw: code(cells[2]) })
  }
  return rows
}

// ---------------------------------------------------------------------------------------------
// The page's translation.

const pageText = readFileSync(join(ROOT, PAGE), 'utf8')
const commandLine = recipe(PAGE, 'sh')
const gatewayYaml = recipe(PAGE, 'yaml')

interface PairOptions {
  /** oauth2-proxy flags of the scenario, after the page's. */
  flags?: (o2p: string) => string[]
  /** Gateway keys of the scenario, merged over the page's YAML. */
  config?: Record<string, unknown>
  /** Keys of the page's upstream for the scenario, merged over it. */
  upstream?: Record<string, unknown>
  provider?: Omit<DevProviderOptions, 'clients'>
}

interface Pair {
  idp: DevProvider
  o2p: OAuth2Proxy
  gw: string
  live: LiveGateway
}

const upstream = await startEchoUpstream()
t.teardown(() => upstream.close())
const dir = mkdtempSync(join(tmpdir(), 'ogw-migration-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

function merge(base: Record<string, unknown>, extra: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base }
  const mergeable = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v)
  for (const [key, value] of Object.entries(extra)) {
    const current = out[key]
    out[key] = mergeable(current) && mergeable(value) ? merge(current, value) : value
  }
  return out
}

/** The page's command line as arguments, its example addresses replaced by the test's. */
function pageFlags(idp: string, o2p: string): string[] {
  const words = commandLine
    .replace(/\\\n/g, ' ')
    .replaceAll('"$OIDC_CLIENT_SECRET"', CLIENT_SECRET)
    .replaceAll('"$COOKIE_SECRET"', COOKIE_SECRET)
    .replaceAll('https://idp.example.com/realms/main', idp)
    .replaceAll('https://app.example.com', o2p)
    .replaceAll('http://127.0.0.1:3000', upstream.url)
    .trim()
    .split(/\s+/)
  if (words[0] !== 'oauth2-proxy') throw new Error(`${PAGE}: the sh block is not an oauth2-proxy command line`)
  return words.slice(1)
}

/** The page's YAML, its example addresses replaced by the test's. */
function pageConfig(idp: string, gw: string, port: number): Record<string, unknown> {
  const text = gatewayYaml
    .replaceAll('${OIDC_CLIENT_SECRET}', CLIENT_SECRET)
    .replaceAll('${COOKIE_SECRET}', COOKIE_SECRET)
    .replaceAll('https://idp.example.com/realms/main', idp)
    .replaceAll('https://app.example.com', gw)
    .replaceAll('http://127.0.0.1:3000', upstream.url)
  return merge(parseYaml(text) as Record<string, unknown>, {
    server: { host: '127.0.0.1', port },
    // What the page says an http:// issuer needs (the development provider is http on loopback).
    provider: { allowInsecureHttp: true },
    log: { level: 'silent' },
  })
}

let pairs = 0

/**
 * A provider with one client `app` that has both callbacks, the gateway and oauth2-proxy in front
 * of the echo upstream. `extraRedirects`: more redirect URIs of the client (an nginx origin).
 */
async function startPair(options: PairOptions & { extraRedirects?: string[]; gatewayPort?: Reservation } = {}): Promise<Pair> {
  const reservation = options.gatewayPort ?? (await reservePort())
  t.teardown(() => reservation.release())
  const o2pPort = await freePort()
  const gw = `http://127.0.0.1:${reservation.port}`
  const o2pOrigin = `http://127.0.0.1:${o2pPort}`
  const idp = await startTestProvider(t, {
    ...options.provider,
    clients: [
      {
        clientId: 'app',
        clientSecret: CLIENT_SECRET,
        redirectUris: [`${gw}/api/v1/openid/callback`, `${o2pOrigin}/oauth2/callback`, ...(options.extraRedirects ?? [])],
        postLogoutRedirectUris: [`${gw}/`, `${o2pOrigin}/`],
      },
    ],
  })
  const path = join(dir, `gateway-${pairs++}.yaml`)
  const config = merge(pageConfig(idp.issuer, gw, reservation.port), options.config ?? {})
  const [app] = config.upstreams as Array<Record<string, unknown>>
  config.upstreams = [merge(app ?? {}, options.upstream ?? {})]
  writeFileSync(path, stringify(config))
  const live = await LiveGateway.start({ path, env: {}, listening: reservation.server })
  t.teardown(() => live.close(1000))
  reservation.handOver()
  await live.listen()
  await live.app.providersReady
  const o2p = await startOAuth2Proxy(t, (url) => [...pageFlags(idp.issuer, url), ...(options.flags?.(url) ?? [])], o2pPort)
  placeholders = [
    [idp.issuer, '<idp>'],
    [gw, '<app>'],
    [o2p.url, '<app>'],
    [upstream.url, '<upstream>'],
    [new URL(gw).host, '<app host>'],
    [new URL(o2p.url).host, '<app host>'],
  ]
  return { idp, o2p, gw, live }
}

// ---------------------------------------------------------------------------------------------
// Measuring helpers.

/** The request the application received last. */
function atApp(): RecordedRequest {
  const last = upstream.requests.at(-1)
  if (last === undefined) throw new Error('nothing reached the application')
  return last
}

/** What reached the application since `before`, as `<method> <url>` or `nothing`. */
function reached(before: number): string {
  const got = upstream.requests.slice(before)
  return got.length === 0 ? 'nothing' : got.map((r) => `${r.method} ${r.url}`).join(', ')
}

/** A response as a client sees it: the status, and where a redirect goes. */
function answer(res: Response): string {
  const location = res.headers.get('location')
  if (location === null) return String(res.status)
  return `${res.status} ${location}`
}

/** Where a redirect to the provider goes, without the values of its query that change each time. */
function providerRedirect(res: Response, issuer: string): string {
  const location = res.headers.get('location') ?? ''
  if (!location.startsWith(issuer)) return answer(res)
  const url = new URL(location)
  return `${res.status} ${url.origin}${url.pathname}?${[...url.searchParams.keys()].sort().join('&')}`
}

const TOKEN = /^[A-Za-z0-9._~+/=-]{20,}$/

/**
 * The identity and forwarding headers the application received, by name, with tokens elided and
 * the cookies by name (`session` for the proxy's own, whatever it calls them).
 */
function identityAtApp(request: RecordedRequest, sessionCookie: RegExp): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(request.headers)) {
    if (!/^(x-forwarded-|x-auth-request-|x-real-ip$|authorization$|cookie$|host$)/.test(name)) continue
    const text = Array.isArray(value) ? value.join(', ') : (value ?? '')
    if (name === 'cookie') {
      const names = text.split(/;\s*/).map((pair) => pair.slice(0, pair.indexOf('=')))
      out[name] = [...new Set(names.map((n) => (sessionCookie.test(n) ? 'session' : 'other')))].sort().join(',')
    } else if (name === 'authorization') out[name] = text.replace(/^Bearer .+$/, 'Bearer <token>')
    else if (name.endsWith('auth-time')) out[name] = /^\d+$/.test(text) ? '<time>' : text
    else out[name] = TOKEN.test(text) && !text.includes('@') ? '<token>' : text
  }
  return out
}

/** Compares the headers of two requests one by one, each under its own key. */
function measureHeaders(prefix: string, o2p: Record<string, string>, gw: Record<string, string>): void {
  for (const name of [...new Set([...Object.keys(o2p), ...Object.keys(gw)])].sort()) measure(`${prefix} ${name}`, o2p[name] ?? 'absent', gw[name] ?? 'absent')
}

/** The session cookie's Set-Cookie attributes (the first of that name), as a browser stores it. */
function cookieAttributes(res: Response, name: RegExp): string {
  const c = res.headers
    .getSetCookie()
    .map((l) => parseSetCookie(l, res.url))
    .find((cookie) => cookie !== undefined && !cookie.deletes && name.test(cookie.name))
  if (c === undefined) return 'none'
  // In hours: the gateway counts the seconds left of the session, which a second may shorten.
  const hours = (ms: number): string => `${Math.round(ms / 3_600_000)}h`
  const lifetime =
    c.maxAge !== undefined ? `Max-Age ${hours(c.maxAge * 1000)}` : c.expiresAt !== undefined ? `Expires in ${hours(c.expiresAt - Date.now())}` : 'session'
  return [
    `name=${c.name}`,
    `path=${c.path}`,
    c.domain === undefined ? 'host-only' : `domain=${c.domain}`,
    c.secure ? 'Secure' : '',
    c.httpOnly ? 'HttpOnly' : '',
    `SameSite=${c.sameSite ?? ''}`,
    lifetime,
  ]
    .filter((s) => s !== '')
    .join('; ')
}

/** The scopes a sign-in asks for (its redirect to the provider), in alphabetical order. */
function scope(res: Response): string {
  const asked = new URL(res.headers.get('location') ?? 'http://none.invalid/').searchParams.get('scope')
  return asked === null ? 'none' : asked.split(' ').sort().join(' ')
}

/** The session cookies an answer sets (deletions left out), their names with the proxy's base name as `<name>`. */
function cookiesSet(res: Response, name: RegExp, base: string): string {
  const set = res.headers
    .getSetCookie()
    .map((l) => parseSetCookie(l, res.url))
    .filter((c) => c !== undefined && !c.deletes && name.test(c.name))
    .map((c) => c?.name.replace(base, '<name>'))
  return set.length === 0 ? 'none' : set.join(', ')
}

const O2P_SESSION = /^_oauth2_proxy(_\d+)?$/
const GW_SESSION = /^(__Host-|__Secure-)?ogw(-|_|$)/
/** The cookies of the name both are given with `--cookie-name` and `cookies.name` (oauth2-proxy's CSRF cookie left out). */
const APP_SESSION = /^(__Host-|__Secure-)?app_session(_\d+|_cred)?$/

interface SignedIn {
  browser: Browser
  /** The first answer to the deep link, the callback's answer, the final answer. */
  first: Response
  callback: Response
  final: Response
  /** What the application received with the final answer. */
  request: RecordedRequest | undefined
}

/**
 * A browser opens `origin + target` and signs in as `username` wherever the proxy sends it: to
 * the provider, or first to oauth2-proxy's sign-in page, whose button it presses.
 */
async function signInFromDeepLink(origin: string, target: string, username: string, callbackOrigin = origin): Promise<SignedIn> {
  const browser = new Browser()
  const first = await browser.fetch(`${origin}${target}`, { navigate: true })
  let start = `${origin}${target}`
  const firstLocation = first.headers.get('location')
  if (firstLocation !== null && callbackOrigin !== origin && new URL(firstLocation, first.url).origin === callbackOrigin) {
    start = new URL(firstLocation, first.url).href
  } else if (first.status === 403 || first.status === 200) {
    // oauth2-proxy's sign-in page: a form whose button starts the sign-in.
    const form = parseForms(await first.clone().text(), first.url).find((f) => f.action.includes('/oauth2/start'))
    if (form === undefined) throw new Error(`no sign-in form at ${first.url}`)
    const action = new URL(form.action)
    for (const [k, v] of Object.entries(form.fields)) action.searchParams.set(k, v)
    start = action.href
  }
  const callback = await browser.signIn(start, username, { gatewayOrigin: callbackOrigin })
  const location = callback.headers.get('location')
  const before = upstream.requests.length
  const final = location === null ? callback : (await browser.follow(new URL(location, callback.url))).response
  return { browser, first, callback, final, request: upstream.requests.length > before ? atApp() : undefined }
}

/**
 * A JWT signed with the provider's key as an API client sends it: an access token (RFC 9068's
 * `typ: at+jwt`, with `scope` and `client_id`) or one shaped like an ID token (audience the client,
 * no access-token marker).
 */
function bearerJwt(idp: DevProvider, kind: 'access token' | 'ID token'): Promise<string> {
  const claims = { sub: 'carol', aud: 'app', email: 'carol@example.com', email_verified: true, preferred_username: 'carol' }
  return kind === 'access token'
    ? idp.signJwt({ ...claims, scope: 'openid email profile', client_id: 'app' }, { typ: 'at+jwt' })
    : idp.signJwt({ ...claims, azp: 'app' })
}

/** An API client with `Authorization: Bearer <token>`: the answer, and the user the application was told. */
async function withBearer(origin: string, token: string): Promise<string> {
  const before = upstream.requests.length
  const res = await fetch(`${origin}/api/data`, { redirect: 'manual', headers: { accept: 'application/json', authorization: `Bearer ${token}` } })
  await res.body?.cancel()
  const got = upstream.requests.slice(before)
  return got.length === 0 ? `${res.status}` : `${res.status}; user ${got.map((r) => r.headers['x-forwarded-user']).join(',')}`
}

// ---------------------------------------------------------------------------------------------
// The scenarios.

t.test('sign-in from a deep link, what the application receives, API clients, cookies', async (t) => {
  const pair = await startPair({
    // The page's rows for these flags: --pass-access-token, --set-xauthrequest (and the default
    // --pass-host-header, --pass-user-headers).
    flags: () => ['--pass-access-token', '--set-xauthrequest', '--cookie-name=app_session', '--cookie-samesite=lax', '--cookie-expire=8h'],
    config: { cookies: { name: 'app_session', sameSite: 'lax' }, session: { maxAgeSeconds: 28800 } },
    upstream: { forwardAccessToken: true },
  })
  const target = '/deep/link?a=1&b=2'
  const o2p = await signInFromDeepLink(pair.o2p.url, target, 'alice')
  const gw = await signInFromDeepLink(pair.gw, target, 'alice')
  measure(
    'deep link: first answer to a browser',
    o2p.first.status === 403 ? `403 sign-in page` : providerRedirect(o2p.first, pair.idp.issuer),
    providerRedirect(gw.first, pair.idp.issuer),
  )
  measure('deep link: back from the provider', answer(o2p.callback), answer(gw.callback))
  measure('deep link: the page reached', `${o2p.final.status} ${o2p.request?.url}`, `${gw.final.status} ${gw.request?.url}`)
  measure('sign-in: session cookie', cookieAttributes(o2p.callback, APP_SESSION), cookieAttributes(gw.callback, APP_SESSION))
  measure('sign-in: session cookies set', cookiesSet(o2p.callback, APP_SESSION, 'app_session'), cookiesSet(gw.callback, APP_SESSION, 'app_session'))
  if (o2p.request === undefined || gw.request === undefined) {
    throw new Error(`the deep link did not reach the application: ${o2p.final.status} ${await o2p.final.text()} / ${gw.final.status}; ${pair.o2p.log()}`)
  }
  measureHeaders('application receives', identityAtApp(o2p.request, APP_SESSION), identityAtApp(gw.request, APP_SESSION))

  expectBoth(t, 'deep link: back from the provider', '302 /deep/link?a=1&b=2')
  expectBoth(t, 'deep link: the page reached', '200 /deep/link?a=1&b=2')
  expectBoth(t, 'application receives x-forwarded-user', 'alice')
  expectBoth(t, 'application receives x-forwarded-email', 'alice@example.com')

  // A client's own identity headers, sent along with a signed-in session.
  // And where it says it comes from: the page's --reverse-proxy and trustedProxies (10.0.0.0/8,
  // which the test's loopback client is not).
  const forged = {
    'x-forwarded-user': 'mallory',
    'x-forwarded-email': 'mallory@example.com',
    'x-forwarded-groups': 'admins',
    'x-auth-request-user': 'mallory',
    'x-forwarded-for': '203.0.113.9',
    'x-forwarded-host': 'evil.example',
    'x-forwarded-proto': 'https',
  }
  await o2p.browser.fetch(`${pair.o2p.url}/forged`, { headers: forged })
  const o2pForged = identityAtApp(atApp(), APP_SESSION)
  await gw.browser.fetch(`${pair.gw}/forged`, { headers: forged })
  const gwForged = identityAtApp(atApp(), APP_SESSION)
  for (const name of ['x-forwarded-user', 'x-forwarded-groups', 'x-auth-request-user', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto']) {
    measure(`signed in, forged headers: ${name}`, o2pForged[name] ?? 'absent', gwForged[name] ?? 'absent')
  }

  // A client's Host: oauth2-proxy passes it on (--pass-host-header), the gateway its own.
  const o2pHost = await rawRequest(pair.o2p.url, '/host', { headers: { cookie: o2p.browser.cookieHeader(`${pair.o2p.url}/`), host: 'elsewhere.example' } })
  const o2pAppHost = o2pHost.status === 200 ? atApp().headers.host : `not reached (${o2pHost.status})`
  const gwHost = await rawRequest(pair.gw, '/host', { headers: { cookie: gw.browser.cookieHeader(`${pair.gw}/`), host: 'elsewhere.example' } })
  const gwAppHost = gwHost.status === 200 ? atApp().headers.host : `not reached (${gwHost.status})`
  measure('signed in, a client-chosen Host: the application receives', o2pAppHost, gwAppHost)

  // API clients without a session: a script asking for JSON, and curl's Accept.
  for (const [what, accept] of [
    ['application/json', 'application/json'],
    ['*/*', '*/*'],
  ] as const) {
    const before = upstream.requests.length
    const a = await fetch(`${pair.o2p.url}/api/data`, { redirect: 'manual', headers: { accept } })
    const b = await fetch(`${pair.gw}/api/data`, { redirect: 'manual', headers: { accept } })
    measure(`API client without a session, Accept ${what}`, providerRedirect(a, pair.idp.issuer), providerRedirect(b, pair.idp.issuer))
    await a.body?.cancel()
    await b.body?.cancel()
    t.equal(upstream.requests.length, before, 'nothing reached the application')
  }
  // A page script of a signed-in browser.
  const a = await o2p.browser.fetch(`${pair.o2p.url}/api/data`)
  const b = await gw.browser.fetch(`${pair.gw}/api/data`)
  measure('API client with the session cookie', a.status, b.status)
  expectBoth(t, 'signed in, forged headers: x-forwarded-user', 'alice')
  expectBoth(t, 'API client without a session, Accept application/json', '401')
  expectBoth(t, 'API client with the session cookie', '200')

  // A Bearer access token, without --skip-jwt-bearer-tokens.
  const access = await bearerJwt(pair.idp, 'access token')
  measure('bearer: an access token, no --skip-jwt-bearer-tokens', await withBearer(pair.o2p.url, access), await withBearer(pair.gw, access))

  // A sign-in asked to return to a host that neither --whitelist-domain nor redirects.allowedHosts names.
  const elsewhere = encodeURIComponent('http://elsewhere.example/x')
  const o2pAway = await new Browser().signIn(`${pair.o2p.url}/oauth2/start?rd=${elsewhere}`, 'alice')
  const gwAway = await new Browser().signIn(`${pair.gw}/api/v1/openid/redirect?redirectAfter=${elsewhere}`, 'alice')
  measure('redirects: a sign-in asked to return to a host not allowed', answer(o2pAway), answer(gwAway))

  // The scope the sign-in asks for.
  const o2pStart = await new Browser().fetch(`${pair.o2p.url}/oauth2/start?rd=/x`, { navigate: true })
  const gwStart = await new Browser().fetch(`${pair.gw}/api/v1/openid/redirect?redirectAfter=/x`, { navigate: true })
  measure('sign-in: scope asked for', scope(o2pStart), scope(gwStart))
  measure(
    'sign-in: PKCE method',
    new URL(o2pStart.headers.get('location') ?? '').searchParams.get('code_challenge_method') ?? 'none',
    new URL(gwStart.headers.get('location') ?? '').searchParams.get('code_challenge_method') ?? 'none',
  )
})

t.test('public paths: --skip-auth-route and publicPaths', async (t) => {
  const pair = await startPair({ flags: () => ['--skip-auth-route=^/public/'], upstream: { publicPaths: ['/public/**'] } })
  for (const [what, method, path] of [
    ['GET /public/logo.png', 'GET', '/public/logo.png'],
    ['POST /public/form', 'POST', '/public/form'],
    ['GET /publicity', 'GET', '/publicity'],
    ['GET /public/%2e%2e/secret', 'GET', '/public/%2e%2e/secret'],
    ['GET /public/../secret', 'GET', '/public/../secret'],
  ] as const) {
    // Sent byte for byte: fetch would resolve the dot segments itself.
    const before = upstream.requests.length
    const a = await rawRequest(pair.o2p.url, path, { method, headers: { accept: 'application/json' } })
    const o2pReached = reached(before)
    const middle = upstream.requests.length
    const b = await rawRequest(pair.gw, path, { method, headers: { accept: 'application/json' } })
    const gwReached = reached(middle)
    measure(`public paths, anonymous ${what}`, `${a.status}; reached ${o2pReached}`, `${b.status}; reached ${gwReached}`)
  }
  // Signed in, on a public path: does the application learn who it is?
  const o2p = await signInFromDeepLink(pair.o2p.url, '/private', 'alice')
  const gw = await signInFromDeepLink(pair.gw, '/private', 'alice')
  await o2p.browser.fetch(`${pair.o2p.url}/public/x`)
  const o2pUser = atApp().headers['x-forwarded-user'] ?? 'absent'
  await gw.browser.fetch(`${pair.gw}/public/x`)
  const gwUser = atApp().headers['x-forwarded-user'] ?? 'absent'
  measure('public paths, signed in: x-forwarded-user', o2pUser, gwUser)
  expectBoth(t, 'public paths, anonymous GET /public/logo.png', '200; reached GET /public/logo.png')
  expectBoth(t, 'public paths, anonymous POST /public/form', '200; reached POST /public/form')
  expectBoth(t, 'public paths, anonymous GET /publicity', '401; reached nothing')
})

t.test('allowed groups: --allowed-group and allow.groups', async (t) => {
  const pair = await startPair({
    flags: () => ['--allowed-group=admins'],
    // The page: add `groups` to the scopes where the provider needs it for a groups claim.
    config: { provider: { scopes: ['openid', 'profile', 'email', 'groups'] } },
    upstream: { allow: { emailDomains: ['example.com'], groups: ['admins'] } },
  })
  const o2pStart = await new Browser().fetch(`${pair.o2p.url}/oauth2/start?rd=/x`, { navigate: true })
  const gwStart = await new Browser().fetch(`${pair.gw}/api/v1/openid/redirect?redirectAfter=/x`, { navigate: true })
  measure('allowed groups: scope asked for', scope(o2pStart), scope(gwStart))
  for (const user of ['alice', 'bob']) {
    const o2p = await signInFromDeepLink(pair.o2p.url, '/team', user)
    const gw = await signInFromDeepLink(pair.gw, '/team', user)
    measure(`allowed groups, ${user}: back from the provider`, answer(o2p.callback), answer(gw.callback))
    measure(
      `allowed groups, ${user}: the page reached`,
      `${o2p.final.status}${o2p.request === undefined ? '' : ` ${o2p.request.url}`}`,
      `${gw.final.status}${gw.request === undefined ? '' : ` ${gw.request.url}`}`,
    )
    if (user === 'alice')
      measure(
        'allowed groups: x-forwarded-groups',
        o2p.request?.headers['x-forwarded-groups'] ?? 'absent',
        gw.request?.headers['x-forwarded-groups'] ?? 'absent',
      )
    const a = await o2p.browser.fetch(`${pair.o2p.url}/api/data`, { headers: { accept: 'application/json' } })
    const b = await gw.browser.fetch(`${pair.gw}/api/data`, { headers: { accept: 'application/json' } })
    measure(`allowed groups, ${user}: an API request afterwards`, a.status, b.status)
  }
  expectBoth(t, 'allowed groups, alice: the page reached', '200 /team')
  expectBoth(t, 'allowed groups: x-forwarded-groups', 'admins,staff')
  expectBoth(t, 'allowed groups, bob: the page reached', '403')
})

t.test('allowed emails: --authenticated-emails-file beside --email-domain, allow.emails beside allow.emailDomains', async (t) => {
  const file = join(dir, 'emails.txt')
  writeFileSync(file, 'alice@example.com\n')
  const pair = await startPair({
    // Beside the page's --email-domain=example.com and allow.emailDomains [example.com].
    flags: () => [`--authenticated-emails-file=${file}`],
    upstream: { allow: { emailDomains: ['example.com'], emails: ['alice@example.com'] } },
  })
  for (const user of ['alice', 'bob']) {
    const o2p = await signInFromDeepLink(pair.o2p.url, '/mail', user)
    const gw = await signInFromDeepLink(pair.gw, '/mail', user)
    measure(
      `allowed emails, ${user}: the page reached`,
      `${o2p.final.status}${o2p.request === undefined ? '' : ` ${o2p.request.url}`}`,
      `${gw.final.status}${gw.request === undefined ? '' : ` ${gw.request.url}`}`,
    )
  }
  expectBoth(t, 'allowed emails, alice: the page reached', '200 /mail')
})

t.test('refresh: an expired access token, --cookie-refresh', async (t) => {
  const ttl = 4
  // A second oauth2-proxy, without --cookie-refresh (its default: no refresh).
  const plainPort = await freePort()
  const plainOrigin = `http://127.0.0.1:${plainPort}`
  const pair = await startPair({
    // Keycloak's way: a refresh token with every sign-in, whatever the scope.
    provider: { accessTokenTtlSeconds: ttl, refreshTokenPolicy: 'always', rotateRefreshTokens: true },
    // oauth2-proxy refreshes a session older than --cookie-refresh (pkg/middleware/stored_session.go),
    // whatever its access token's expiry: set below the token's lifetime, as its docs advise.
    flags: () => ['--pass-access-token', `--cookie-refresh=${ttl - 1}s`],
    upstream: { forwardAccessToken: true },
    extraRedirects: [`${plainOrigin}/oauth2/callback`],
  })
  const plainProxy = await startOAuth2Proxy(t, (url) => [...pageFlags(pair.idp.issuer, url), '--pass-access-token'], plainPort)
  placeholders.push([plainProxy.url, '<app>'], [new URL(plainProxy.url).host, '<app host>'])
  const token = (r: RecordedRequest | undefined): string => String(r?.headers['x-forwarded-access-token'] ?? r?.headers.authorization ?? '')
  const plain = await signInFromDeepLink(plainProxy.url, '/r', 'alice')
  const o2p = await signInFromDeepLink(pair.o2p.url, '/r', 'alice')
  const gw = await signInFromDeepLink(pair.gw, '/r', 'alice')
  const signedInAt = Date.now()
  const before = { plain: token(plain.request), o2p: token(o2p.request), gw: token(gw.request) }
  t.not(before.plain, '', 'oauth2-proxy without --cookie-refresh forwarded an access token')
  t.not(before.o2p, '', 'oauth2-proxy forwarded an access token')
  t.not(before.gw, '', 'the gateway forwarded an access token')
  await eventually('both access tokens expired', () => Date.now() > signedInAt + (ttl + 1) * 1000, (ttl + 3) * 1000)
  const p = await plain.browser.fetch(`${plainProxy.url}/after`, { navigate: true })
  const plainAfter = p.status === 200 ? token(atApp()) : ''
  const a = await o2p.browser.fetch(`${pair.o2p.url}/after`, { navigate: true })
  const o2pAfter = a.status === 200 ? token(atApp()) : ''
  const b = await gw.browser.fetch(`${pair.gw}/after`, { navigate: true })
  const gwAfter = b.status === 200 ? token(atApp()) : ''
  measure('refresh: the request after the access token expired', a.status, b.status)
  measure('refresh: the application receives a new access token', o2pAfter !== '' && o2pAfter !== before.o2p, gwAfter !== '' && gwAfter !== before.gw)
  measure('refresh: the answer sets the session cookies again', cookiesSet(a, O2P_SESSION, '') !== 'none', cookiesSet(b, GW_SESSION, '') !== 'none')
  measure(
    'refresh, oauth2-proxy without --cookie-refresh: the request after the access token expired',
    `${p.status}; ${plainAfter === before.plain ? 'the expired access token' : plainAfter === '' ? 'no access token' : 'a new access token'}`,
    `${b.status}; ${gwAfter === before.gw ? 'the expired access token' : gwAfter === '' ? 'no access token' : 'a new access token'}`,
  )
  expectBoth(t, 'refresh: the request after the access token expired', '200')
  expectBoth(t, 'refresh: the application receives a new access token', 'true')
})

t.test('sign-out', async (t) => {
  const pair = await startPair()
  const o2p = await signInFromDeepLink(pair.o2p.url, '/s', 'alice')
  const gw = await signInFromDeepLink(pair.gw, '/s', 'alice')
  // GET on the sign-out URL of each (what a link does).
  const a = await o2p.browser.fetch(`${pair.o2p.url}/oauth2/sign_out`, { navigate: true })
  const b = await gw.browser.fetch(`${pair.gw}/api/v1/openid/sign-out`, { navigate: true })
  measure('sign-out: GET on the sign-out URL', answer(a), answer(b))
  const o2pAfterGet = await o2p.browser.fetch(`${pair.o2p.url}/api/data`, { headers: { accept: 'application/json' } })
  const gwAfterGet = await gw.browser.fetch(`${pair.gw}/api/data`, { headers: { accept: 'application/json' } })
  measure('sign-out: signed in after that GET', o2pAfterGet.status === 200, gwAfterGet.status === 200)
  // The gateway's sign-out: the page's form (a POST), then the provider's end-session.
  const form = parseForms(await b.text(), b.url).find((f) => f.method === 'POST')
  if (form === undefined) throw new Error("no form on the gateway's sign-out page")
  const posted = await gw.browser.fetch(form.action, { navigate: true, method: 'POST', body: new URLSearchParams(form.fields), headers: { origin: pair.gw } })
  measure('sign-out: where the sign-out sends the browser', a.status === 302 ? answer(a) : 'stays', providerRedirect(posted, pair.idp.issuer))
  const location = posted.headers.get('location')
  if (location !== null && location.startsWith(pair.idp.issuer)) await gw.browser.confirmProviderLogout(location)
  const gwAfter = await gw.browser.fetch(`${pair.gw}/api/data`, { headers: { accept: 'application/json' } })
  measure('sign-out: signed in afterwards', o2pAfterGet.status === 200, gwAfter.status === 200)
  // Signed out at the provider too? A new sign-in asks for the login again if so.
  await o2p.browser.signIn(`${pair.o2p.url}/oauth2/start?rd=/again`, 'alice', { gatewayOrigin: pair.o2p.url })
  await gw.browser.signIn(`${pair.gw}/api/v1/openid/redirect?redirectAfter=/again`, 'alice')
  measure(
    'sign-out: the next sign-in asks for the login',
    o2p.browser.prompts.filter((p) => p === 'login').length > 1,
    gw.browser.prompts.filter((p) => p === 'login').length > 1,
  )
  expectBoth(t, 'sign-out: signed in afterwards', 'false')
})

t.test('nginx auth_request: /oauth2/auth beside GET /api/v1/openid/auth', async (t) => {
  // oauth2-proxy's nginx integration page (oauth2-proxy.github.io/oauth2-proxy/configuration/
  // integrations/nginx, 7.14.x): its endpoints under the application's host, /oauth2/auth as the
  // auth_request, --set-xauthrequest and --reverse-proxy, 401 sent to /oauth2/sign_in.
  const o2pNginx = await reservePort()
  const gwNginx = await reservePort()
  t.teardown(() => Promise.all([o2pNginx.release(), gwNginx.release()]))
  const pair = await startPair({
    extraRedirects: [`http://127.0.0.1:${o2pNginx.port}/oauth2/callback`],
    flags: () => [
      '--set-xauthrequest',
      '--skip-provider-button',
      `--redirect-url=http://127.0.0.1:${o2pNginx.port}/oauth2/callback`,
      // The sign-in returns to the application's host, as redirects.allowedHosts lets it.
      `--whitelist-domain=127.0.0.1:${o2pNginx.port}`,
      // The groups claim, and with it dana's large session.
      '--scope=openid email profile groups',
    ],
    config: { redirects: { allowedHosts: [`127.0.0.1:${gwNginx.port}`] }, provider: { scopes: ['openid', 'profile', 'email', 'groups'] } },
  })
  const o2pHostPort = new URL(pair.o2p.url).host
  const appHostPort = new URL(upstream.url).host
  const o2pServers = `
server {
    listen 80;
    location /oauth2/ {
        proxy_pass http://${o2pHostPort};
        proxy_set_header Host $host:$server_port;
        proxy_set_header X-Real-IP $remote_addr;
        proxy_set_header X-Auth-Request-Redirect $request_uri;
    }
    location = /oauth2/auth {
        proxy_pass http://${o2pHostPort};
        proxy_set_header Host $host:$server_port;
        proxy_set_header X-Real-IP $remote_addr;
        proxy_set_header X-Forwarded-Uri $request_uri;
        proxy_set_header Content-Length "";
        proxy_pass_request_body off;
    }
    location @oauth2_signin {
        return 302 /oauth2/sign_in?rd=$scheme://$http_host$request_uri;
    }
    location / {
        auth_request /oauth2/auth;
        error_page 401 = @oauth2_signin;
        auth_request_set $user $upstream_http_x_auth_request_user;
        auth_request_set $email $upstream_http_x_auth_request_email;
        auth_request_set $groups $upstream_http_x_auth_request_groups;
        auth_request_set $preferred $upstream_http_x_auth_request_preferred_username;
        proxy_set_header X-Auth-Request-User $user;
        proxy_set_header X-Auth-Request-Email $email;
        proxy_set_header X-Auth-Request-Groups $groups;
        proxy_set_header X-Auth-Request-Preferred-Username $preferred;
        proxy_pass http://${appHostPort};
    }
}
`
  const gwServers = recipe('docs/deploy/nginx.md', 'nginx')
    .replaceAll('https://auth.example.com', pair.gw)
    .replaceAll('127.0.0.1:8080', new URL(pair.gw).host)
    .replaceAll('127.0.0.1:3000', appHostPort)
    .replaceAll('app.example.com', '127.0.0.1')
  const a = await startNginx(t, o2pServers, o2pNginx)
  const b = await startNginx(t, gwServers, gwNginx)
  placeholders.unshift([a.url, '<nginx>'], [b.url, '<nginx>'], [new URL(a.url).host, '<nginx host>'], [new URL(b.url).host, '<nginx host>'])

  // The check asked directly, without a session and without naming a request.
  const o2pBare = await fetch(`${pair.o2p.url}/oauth2/auth`, { redirect: 'manual' })
  const gwBare = await fetch(`${pair.gw}/api/v1/openid/auth`, { redirect: 'manual' })
  measure('auth_request: the check without a session, naming no request', o2pBare.status, gwBare.status)
  // A browser through nginx.
  const target = '/deep?a=1&b=2'
  const o2p = await signInFromDeepLink(a.url, target, 'alice')
  const gw = await signInFromDeepLink(b.url, target, 'alice', pair.gw)
  measure('auth_request: first answer to a browser', answer(o2p.first), answer(gw.first))
  measure('auth_request: the page reached', `${o2p.final.status} ${o2p.request?.url}`, `${gw.final.status} ${gw.request?.url}`)
  if (o2p.request !== undefined && gw.request !== undefined) {
    const pick = (r: RecordedRequest): Record<string, string> =>
      Object.fromEntries(Object.entries(identityAtApp(r, /^(_oauth2_proxy|(__Host-|__Secure-)?ogw)/)).filter(([k]) => k.startsWith('x-auth-request-')))
    measureHeaders('auth_request: application receives', pick(o2p.request), pick(gw.request))
  }
  // A session too large for one cookie (dana is in 150 groups), through nginx's default buffers:
  // large_client_header_buffers 4 8k (a request header line, Cookie too, of at most 8 KiB) and
  // proxy_buffer_size 4k|8k (the check's answer headers, X-Auth-Request-Groups among them).
  const o2pLarge = await signInFromDeepLink(a.url, '/large', 'dana')
  const gwLarge = await signInFromDeepLink(b.url, '/large', 'dana', pair.gw)
  const cookieBytes = (s: SignedIn, url: string): string => (s.browser.cookieHeader(url).length > 8192 ? 'over 8 KiB' : 'under 8 KiB')
  measure(
    'auth_request, a large session: the page reached',
    `${o2pLarge.final.status}; Cookie ${cookieBytes(o2pLarge, `${a.url}/large`)}`,
    `${gwLarge.final.status}; Cookie ${cookieBytes(gwLarge, `${b.url}/large`)}`,
  )

  // The check asked directly with the session, naming the request as the recipes do.
  const o2pCheck = await fetch(`${pair.o2p.url}/oauth2/auth`, { headers: { cookie: o2p.browser.cookieHeader(`${a.url}/`), 'x-forwarded-uri': '/deep' } })
  const gwCheck = await fetch(`${pair.gw}/api/v1/openid/auth`, {
    headers: { cookie: gw.browser.cookieHeader(`${b.url}/`), 'x-original-url': `${b.url}/deep`, 'x-original-method': 'GET' },
  })
  measure('auth_request: the check with a session', o2pCheck.status, gwCheck.status)
  // An API client through nginx without a session.
  const o2pApi = await fetch(`${a.url}/api`, { redirect: 'manual', headers: { accept: 'application/json' } })
  const gwApi = await fetch(`${b.url}/api`, { redirect: 'manual', headers: { accept: 'application/json' } })
  measure('auth_request: API client without a session', answer(o2pApi), answer(gwApi))
  expectBoth(t, 'auth_request: the page reached', '200 /deep?a=1')
  expectBoth(t, 'auth_request: application receives x-auth-request-user', 'alice')
})

t.test('settings: --oidc-groups-claim, --skip-auth-preflight, --pass-host-header=false, --skip-jwt-bearer-tokens', async (t) => {
  const pair = await startPair({
    provider: {
      extraClaims: {
        // dana's: a session too large for one cookie.
        roles: (username) =>
          username === 'alice'
            ? ['editors', 'viewers']
            : username === 'dana'
              ? Array.from({ length: 150 }, (_, i) => `team-${String(i).padStart(3, '0')}-platform-engineering`)
              : [],
      },
    },
    flags: () => ['--oidc-groups-claim=roles', '--skip-auth-preflight', '--pass-host-header=false', '--skip-jwt-bearer-tokens'],
    config: { provider: { groupsClaim: 'roles' } },
    upstream: { allowPreflight: true, passHostHeader: false },
  })
  const o2p = await signInFromDeepLink(pair.o2p.url, '/claims', 'alice')
  const gw = await signInFromDeepLink(pair.gw, '/claims', 'alice')
  if (o2p.request === undefined || gw.request === undefined) throw new Error('the sign-in did not reach the application')
  for (const name of ['x-forwarded-groups', 'host']) measure(`settings: ${name}`, o2p.request.headers[name] ?? 'absent', gw.request.headers[name] ?? 'absent')
  for (const [what, headers] of [
    ['a CORS preflight', { origin: 'http://spa.example', 'access-control-request-method': 'PUT' }],
    ['an OPTIONS request that is no preflight', {}],
  ] as const) {
    const before = upstream.requests.length
    const a = await rawRequest(pair.o2p.url, '/api/items', { method: 'OPTIONS', headers })
    const o2pReached = reached(before)
    const middle = upstream.requests.length
    const b = await rawRequest(pair.gw, '/api/items', { method: 'OPTIONS', headers })
    measure(`preflight: ${what} without a session`, `${a.status}; reached ${o2pReached}`, `${b.status}; reached ${reached(middle)}`)
  }
  // A large session: both split it over several cookies.
  const o2pLarge = await signInFromDeepLink(pair.o2p.url, '/large', 'dana')
  const gwLarge = await signInFromDeepLink(pair.gw, '/large', 'dana')
  const large = (s: SignedIn): string => `${s.final.status}; ${String(s.request?.headers['x-forwarded-groups'] ?? '').split(',').length} groups`
  measure('large session: the page reached', large(o2pLarge), large(gwLarge))
  measure('large session: cookies set', cookiesSet(o2pLarge.callback, O2P_SESSION, '_oauth2_proxy'), cookiesSet(gwLarge.callback, GW_SESSION, 'ogw'))
  for (const kind of ['access token', 'ID token'] as const) {
    const token = await bearerJwt(pair.idp, kind)
    measure(
      `bearer: ${kind === 'access token' ? 'an access token' : 'an ID token'}, --skip-jwt-bearer-tokens`,
      await withBearer(pair.o2p.url, token),
      await withBearer(pair.gw, token),
    )
  }
  expectBoth(t, 'bearer: an access token, --skip-jwt-bearer-tokens', '200; user carol')
  expectBoth(t, 'settings: x-forwarded-groups', 'editors,viewers')
  expectBoth(t, 'preflight: a CORS preflight without a session', '200; reached OPTIONS /api/items')
})

t.test('settings: --user-id-claim', async (t) => {
  // --user-id-claim is the deprecated name of --oidc-email-claim: oauth2-proxy's
  // providers/providers.go sets the email claim from it, and X-Forwarded-User stays `sub`. The
  // gateway's email header is always the `email` claim: nothing is configured on its side.
  const pair = await startPair({ flags: () => ['--user-id-claim=preferred_username'] })
  const o2p = await signInFromDeepLink(pair.o2p.url, '/who', 'alice')
  const gw = await signInFromDeepLink(pair.gw, '/who', 'alice')
  const seen = (s: SignedIn): string =>
    s.request === undefined
      ? `${s.final.status}`
      : `${s.final.status}; user ${s.request.headers['x-forwarded-user']}; email ${s.request.headers['x-forwarded-email']}`
  measure('settings: --user-id-claim=preferred_username', seen(o2p), seen(gw))
  t.equal(measured.get('settings: --user-id-claim=preferred_username')?.gw, '200; user alice; email alice@example.com')
})

// ---------------------------------------------------------------------------------------------
// The measurements against the page.

t.test("every difference measured is a row of the page's table, and every row a difference measured", async (t) => {
  if (process.env.MIGRATION_PRINT === '1') {
    for (const [key, v] of measured) console.error(`${v.o2p === v.gw ? '  same' : '  DIFF'} | \`${key}\` | \`${v.o2p}\` | \`${v.gw}\``)
  }
  const rows = tableRows(pageText)
  const differences = [...measured].filter(([, v]) => v.o2p !== v.gw)
  for (const [key, v] of differences) {
    const row = rows.find((r) => r.key === key)
    t.ok(row, `the page lists the difference "${key}": oauth2-proxy \`${v.o2p}\`, the gateway \`${v.gw}\``)
    if (row === undefined) continue
    t.equal(row.o2p, v.o2p, `${key}: oauth2-proxy as the page says`)
    t.equal(row.gw, v.gw, `${key}: the gateway as the page says`)
  }
  for (const row of rows) {
    const v = measured.get(row.key)
    t.ok(v !== undefined && v.o2p !== v.gw, `the page's row "${row.key}" is a difference the test measured`)
  }
  t.equal(new Set(rows.map((r) => r.key)).size, rows.length, 'each row once')
})
