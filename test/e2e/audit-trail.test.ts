import { readFileSync } from 'node:fs'
import t from 'tap'
import { BACKCHANNEL_LOGOUT_PATH } from '#src/contract/endpoints'
import { startDevProvider } from '#src/dev/provider'
import { systemClock } from '#src/lib/clock'
import { AUDIT_EVENTS, AUDIT_FIELDS, logDigest } from '#src/ops/audit'
import { CookieCipher } from '#src/session/cipher'
import { GatewayCookies } from '#src/session/cookies'
import { fromSealed, SEALED_CREDENTIALS } from '#src/session/sealed'
import type { Session } from '#src/session/types'
import type { Browser } from '../fixtures/browser.ts'
import { eventually } from '../fixtures/poll.ts'
import { SESSION_REVOKED, startTransmitter } from '../fixtures/ssf-transmitter.ts'
import { CLIENT_ID, CLIENT_SECRET, COOKIE_SECRET, revokeAtProvider, startStack, type Stack } from '../fixtures/stack.ts'

// The audit trail (ops/audit.ts, docs/operations.md "Audit trail") against the real oidc-provider,
// a Shared Signals transmitter and the gateway as the CLI runs it, on one stack: every sign-in,
// refresh, logout, back-channel logout and Shared Signals revocation writes one line, accepted or
// refused, with the provider, `sub`, digests of the session ids, `acr`, the client address and a
// stable reason; and no line of the whole log carries a token, a cookie value, a session id or a
// secret.

const PUSH_AUTHORIZATION = 'Bearer push-secret-0123456789abcdef'
const MANAGEMENT_TOKEN = 'management-token-0123'
const ACR = 'urn:example:pwd'
const JSON_ACCEPT = { accept: 'application/json' }
const LOGOUT = '/api/v1/openid/logout'
const REFRESH = '/api/v1/openid/refresh'

type Line = Record<string, unknown>

const tx = await startTransmitter({ audience: CLIENT_ID, requireToken: MANAGEMENT_TOKEN })
t.teardown(() => tx.close())
const lines: string[] = []
const stack = await startStack(t, {
  backchannelLogout: true,
  provider: { acrValues: [ACR, 'urn:example:mfa'] },
  config: {
    provider: { ssf: { configurationUrl: tx.configurationUrl, bearerToken: MANAGEMENT_TOKEN, delivery: 'push', authorization: PUSH_AUTHORIZATION } },
    log: { level: 'info' },
  },
  logStream: { write: (line: string) => void lines.push(line) },
})
await eventually('the Shared Signals stream is verified', () => lines.some((l) => l.includes('"outcome":"verified"')))

/** Every value that must never reach the log, gathered as the test goes. */
const secrets = new Set<string>([CLIENT_SECRET, COOKIE_SECRET, PUSH_AUTHORIZATION, PUSH_AUTHORIZATION.slice('Bearer '.length), MANAGEMENT_TOKEN])

function parsed(): Line[] {
  return lines.map((line) => JSON.parse(line) as Line)
}

/** The audit lines of `event` written since `from` (an index in `lines`). */
function audited(event: string, from: number): Line[] {
  return parsed()
    .slice(from)
    .filter((l) => l.audit === event)
}

/** The cookie session of `browser`, opened with the stack's secrets; its cookie values and tokens join `secrets`. */
function sessionOf(browser: Browser, stack: Stack): Session {
  const header = browser.cookieHeader(stack.gw + REFRESH)
  const jar = Object.fromEntries(header.split('; ').map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]))
  for (const value of Object.values(jar)) if (value.length >= 16) secrets.add(value)
  const cookies = new GatewayCookies(stack.config.cookies, new CookieCipher(stack.config.cookies.secrets, systemClock))
  const session = fromSealed(cookies.read({ url: REFRESH, cookies: jar }, 'session'))
  const credentials = SEALED_CREDENTIALS.decode(cookies.read({ url: REFRESH, cookies: jar }, 'credentials'))
  if (session === undefined) throw new Error('the browser holds no session')
  for (const value of [session.id, session.accessToken, credentials?.refreshToken, credentials?.idToken]) if (value !== undefined) secrets.add(value)
  return session
}

/** The fields every line about `session` carries. */
function about(session: Session): Line {
  return {
    provider: 'default',
    sub: session.claims.sub,
    session: logDigest(session.id),
    sid: logDigest(String(session.claims.sid)),
    acr: ACR,
    client: '127.0.0.1',
  }
}

t.test('sign-in: a success names the session; a refused callback names its reason', async (t) => {
  const from = lines.length
  const browser = await stack.signedIn('alice')
  const session = sessionOf(browser, stack)
  t.ok(typeof session.claims.sid === 'string' && session.claims.acr === ACR, 'the ID token carried sid and acr')
  t.match(audited('sign-in', from), [{ msg: 'audit', audit: 'sign-in', outcome: 'success', ...about(session) }], 'one success line with every field')
  t.equal(audited('sign-in', from).length, 1)

  const refused = lines.length
  const res = await fetch(`${stack.gw}/api/v1/openid/callback?code=stolen&state=forged`, { headers: JSON_ACCEPT })
  await res.body?.cancel()
  t.equal(res.status, 403)
  t.match(
    audited('sign-in', refused),
    [{ audit: 'sign-in', outcome: 'refused', reason: 'state_mismatch', client: '127.0.0.1' }],
    'a forged state is refused, logged',
  )
})

t.test('refresh: a success and the refusals, through the refresh endpoint', async (t) => {
  const browser = await stack.signedIn('alice')
  const session = sessionOf(browser, stack)
  const from = lines.length
  const res = await browser.fetch(stack.gw + REFRESH, { headers: JSON_ACCEPT })
  t.equal(res.status, 200)
  secrets.add(((await res.json()) as { value: string }).value)
  t.match(audited('refresh', from), [{ audit: 'refresh', outcome: 'success', ...about(session) }], 'one success line, the same session digest as its sign-in')
  t.equal(audited('refresh', from).length, 1)
  sessionOf(browser, stack)

  const missing = lines.length
  const none = await fetch(stack.gw + REFRESH, { headers: JSON_ACCEPT })
  await none.body?.cancel()
  t.equal(none.status, 400)
  t.match(audited('refresh', missing), [{ outcome: 'refused', reason: 'refresh_token_missing', client: '127.0.0.1' }], 'no session: refused')

  await revokeAtProvider(stack, browser.cookieHeader(stack.gw + REFRESH))
  const revoked = lines.length
  const refused = await browser.fetch(stack.gw + REFRESH, { headers: JSON_ACCEPT })
  await refused.body?.cancel()
  t.equal(refused.status, 409)
  t.match(
    audited('refresh', revoked),
    [{ outcome: 'refused', reason: 'refresh_token_invalid', ...about(session) }],
    'a refresh token the provider revoked: refused, naming the session',
  )
  t.equal(audited('refresh', revoked).length, 1)
})

t.test('logout: DELETE logout, and one without a session', async (t) => {
  const browser = await stack.signedIn('alice')
  const session = sessionOf(browser, stack)
  const from = lines.length
  const res = await browser.fetch(stack.gw + LOGOUT, { method: 'DELETE', headers: JSON_ACCEPT })
  await res.body?.cancel()
  t.equal(res.status, 200)
  t.match(audited('logout', from), [{ audit: 'logout', outcome: 'success', ...about(session) }])
  t.equal(audited('logout', from).length, 1)

  const again = lines.length
  const none = await fetch(stack.gw + LOGOUT, { method: 'DELETE', headers: JSON_ACCEPT })
  await none.body?.cancel()
  t.equal(none.status, 401)
  t.match(audited('logout', again), [{ outcome: 'refused', reason: 'unauthenticated', client: '127.0.0.1' }])

  const crossSite = lines.length
  const form = await fetch(`${stack.gw}/api/v1/openid/sign-out`, { method: 'POST', headers: { origin: 'https://elsewhere.example' }, redirect: 'manual' })
  await form.body?.cancel()
  t.equal(form.status, 400)
  t.match(audited('logout', crossSite), [{ outcome: 'refused', reason: 'bad_request', client: '127.0.0.1' }], 'a sign-out form from another site')
})

t.test("back-channel logout: the provider's logout names the sign-in's sid; a bad token is refused", async (t) => {
  const browser = await stack.signedIn('bob')
  const session = sessionOf(browser, stack)
  const from = lines.length
  const done = await browser.confirmProviderLogout(`${stack.provider?.issuer}/session/end`)
  await done.response.body?.cancel()
  const { acr: _acr, session: _session, ...named } = about(session)
  t.match(audited('backchannel-logout', from), [{ audit: 'backchannel-logout', outcome: 'success', ...named }], "the same sid digest as the sign-in's line")

  const refused = lines.length
  const res = await fetch(stack.gw + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ other: 'field' }) })
  await res.body?.cancel()
  t.equal(res.status, 400)
  t.match(audited('backchannel-logout', refused), [{ outcome: 'refused', reason: 'logout_token', client: '127.0.0.1' }], 'no logout token: refused')
})

t.test('Shared Signals: a session-revoked push ends the subject; a wrong Authorization and a replay are refused', async (t) => {
  const browser = await stack.signedIn('carol')
  const session = sessionOf(browser, stack)
  const { token } = await tx.sign(SESSION_REVOKED, { subId: { format: 'iss_sub', iss: stack.provider?.issuer, sub: 'carol' } })
  secrets.add(token)
  const from = lines.length
  t.equal((await tx.push(token)).status, 202)
  t.match(audited('ssf-revocation', from), [{ audit: 'ssf-revocation', outcome: 'success', provider: 'default', sub: session.claims.sub, client: '127.0.0.1' }])

  const replayed = lines.length
  t.equal((await tx.push(token)).status, 400)
  t.match(audited('ssf-revocation', replayed), [{ outcome: 'refused', reason: 'jti_replay', provider: 'default', client: '127.0.0.1' }])

  const forged = lines.length
  const { token: foreign } = await tx.sign(SESSION_REVOKED, { subId: { format: 'iss_sub', iss: stack.provider?.issuer, sub: 'carol' }, foreignKey: true })
  secrets.add(foreign)
  t.equal((await tx.push(foreign)).status, 400)
  t.match(
    audited('ssf-revocation', forged),
    [{ outcome: 'refused', reason: 'invalid_key', detail: String, provider: 'default', client: '127.0.0.1' }],
    'a SET signed with another key',
  )

  const stranger = lines.length
  t.equal((await tx.push(token, 'Bearer not-the-registered-one')).status, 401)
  t.match(audited('ssf-revocation', stranger), [{ outcome: 'refused', reason: 'authentication_failed', client: '127.0.0.1' }])
})

t.test("refresh: a session signed in at another issuer than its provider's now is refused, naming it", async (t) => {
  const browser = await stack.signedIn('dave')
  const session = sessionOf(browser, stack)
  const other = await startDevProvider({
    clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUris: [`${stack.gw}/api/v1/openid/callback`] }],
  })
  t.teardown(() => other.close())
  stack.replicas[0]?.rewrite((c) => ({ ...c, provider: { ...(c.provider as object), issuer: other.issuer } }))
  t.equal(await stack.live.reload('SIGHUP'), true, 'reloaded onto another issuer')
  const from = lines.length
  const res = await browser.fetch(stack.gw + REFRESH, { headers: JSON_ACCEPT })
  await res.body?.cancel()
  t.equal(res.status, 409)
  t.match(audited('refresh', from), [{ outcome: 'refused', reason: 'refresh_token_invalid', ...about(session) }])
})

t.test('no line of the log carries a token, cookie value, session id or secret; audit lines carry only the documented fields', async (t) => {
  t.ok(secrets.size > 15, `${secrets.size} values looked for`)
  const log = lines.join('')
  for (const secret of secrets) t.notOk(log.includes(secret), `never ${secret.slice(0, 6)}…`)
  t.notMatch(log, /eyJ[\w-]+\.eyJ/, 'no JWT')
  const fields = new Set<string>(AUDIT_FIELDS)
  const extra = parsed()
    .filter((l) => l.audit !== undefined)
    .flatMap((l) => Object.keys(l).filter((k) => !fields.has(k) && !['level', 'time', 'pid', 'hostname', 'reqId', 'msg'].includes(k)))
  t.same(extra, [], 'no field beyond the documented ones')
})

t.test('docs/operations.md lists the events and fields of ops/audit.ts', async (t) => {
  const doc = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8')
  const section = doc.slice(doc.indexOf('### Audit trail'), doc.indexOf('\n## ', doc.indexOf('### Audit trail')))
  const column = (heading: string): string[] => {
    const table = section.slice(section.indexOf(`| ${heading} |`))
    return [...table.slice(0, table.search(/\n\n|$/)).matchAll(/^\| `([\w-]+)` \|/gm)].map((m) => m[1] as string)
  }
  t.same(column('Event'), [...AUDIT_EVENTS], 'the events')
  t.same(column('Field'), [...AUDIT_FIELDS], 'the fields')
})
