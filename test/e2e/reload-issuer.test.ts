import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as jose from 'jose'
import t, { type Test } from 'tap'
import { startDevProvider } from '#src/dev/provider'
import { systemClock } from '#src/lib/clock'
import { CookieCipher } from '#src/session/cipher'
import { CookieSessionStore } from '#src/session/cookie-store'
import { GatewayCookies } from '#src/session/cookies'
import { echo, openSocket, rawRequest } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'
import { CLIENT_ID, CLIENT_SECRET, startStack } from '../fixtures/stack.ts'

// A session is bound to its issuer (OpenID Connect Core 2: `sub` is unique only within `iss`). A
// reload that re-points the provider at another issuer ends the sessions of the old one in every
// store: the old cookie is sent to sign in (302) or refused (401), its open WebSocket closes, and
// the upstream never receives the new issuer (X-Forwarded-Issuer, the assertion's `idp`) for the
// old issuer's `sub`. A sign-in at the new issuer then works.

const JSON_ACCEPT = { accept: 'application/json' }
const NAVIGATION = { accept: 'text/html', 'sec-fetch-mode': 'navigate' }

const dir = mkdtempSync(join(tmpdir(), 'ogw-reissuer-'))
const signingKey = join(dir, 'assert.pem')
writeFileSync(signingKey, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }))

async function rePointed(t: Test, store: 'cookie' | 'memory' | 'redis'): Promise<void> {
  const redisUrl = store === 'redis' ? (await startRedis(t)).url : undefined
  const lines: Array<Record<string, unknown>> = []
  const stack = await startStack(t, {
    config: { session: { store, ...(redisUrl === undefined ? {} : { redisUrl }) }, assertions: { signingKeys: [signingKey] }, log: { level: 'info' } },
    upstreams: [{ name: 'app', websocket: true, identityAssertion: true }],
    logStream: { write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  })
  const oldIssuer = stack.provider!.issuer
  // The other tenant: another issuer, where the gateway's client is registered too.
  const other = await startDevProvider({
    clients: [
      { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUris: [`${stack.gw}/api/v1/openid/callback`], postLogoutRedirectUris: [`${stack.gw}/`] },
    ],
  })
  t.teardown(() => other.close())

  const alice = await stack.signedIn('alice')
  const cookie = alice.cookieHeader(`${stack.gw}/page`)
  const before = await rawRequest(stack.gw, '/page', { headers: { ...JSON_ACCEPT, cookie } })
  t.equal(before.status, 200)
  const seen = before.json<{ headers: Record<string, string> }>().headers
  t.equal(seen['x-forwarded-issuer'], oldIssuer, 'the old issuer, before the reload')
  t.equal(seen['x-forwarded-user'], 'alice')
  const ws = await openSocket(`${stack.gw.replace('http', 'ws')}/socket`, { cookie })
  if (typeof ws === 'number') throw new Error(`upgrade refused with ${ws}`)
  t.teardown(() => ws.terminate())
  t.equal(await echo(ws, 'hi'), 'hi')
  let closeCode: number | undefined
  ws.once('close', (code: number) => (closeCode = code))

  const upstreamSeen = stack.upstream.requests.length
  stack.replicas[0]!.rewrite((c) => ({ ...c, provider: { ...(c.provider as object), issuer: other.issuer } }))
  t.equal(await stack.live.reload('SIGHUP'), true, 'reloaded onto the other issuer')
  t.equal(await eventually('the WebSocket closed', () => closeCode, 5000).catch(() => undefined), 1008, 'the open WebSocket is closed: policy violation')

  const page = await rawRequest(stack.gw, '/page', { headers: { ...NAVIGATION, cookie } })
  t.equal(page.status, 302, 'a page load is sent to sign in')
  t.match(page.headers.location, '/api/v1/openid/redirect?redirectAfter=%2Fpage')
  const api = await rawRequest(stack.gw, '/page', { headers: { ...JSON_ACCEPT, cookie } })
  t.equal(api.status, 401, 'a program is refused')
  t.match(
    lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('session ended: signed in at another issuer')),
    { provider: 'default', sub: 'alice' },
    'logged',
  )
  const check = await rawRequest(stack.gw, '/api/v1/openid/auth', {
    headers: {
      ...JSON_ACCEPT,
      cookie,
      'x-forwarded-method': 'GET',
      'x-forwarded-host': new URL(stack.gw).host,
      'x-forwarded-uri': '/page',
      'x-forwarded-proto': 'http',
    },
  })
  t.equal(check.status, 401, 'the check endpoints refuse it too')
  t.not((await rawRequest(stack.gw, '/api/v1/openid/refresh', { headers: { ...JSON_ACCEPT, cookie } })).status, 200, 'nor is it refreshed at the new issuer')
  const after = stack.upstream.requests.slice(upstreamSeen)
  t.equal(after.filter((r) => r.headers['x-forwarded-user'] === 'alice').length, 0, "the old issuer's alice reaches no upstream")
  t.equal(after.filter((r) => r.headers['x-forwarded-issuer'] === other.issuer).length, 0, 'nor does the new issuer for her')
  t.equal(after.filter((r) => r.headers['x-identity-assertion'] !== undefined).length, 0, 'nor an assertion')

  // Signed in at the new issuer, the same name is the new issuer's user.
  const again = await stack.signedIn('alice')
  const res = await again.fetch(`${stack.gw}/page`, { headers: JSON_ACCEPT })
  t.equal(res.status, 200)
  const headers = ((await res.json()) as { headers: Record<string, string> }).headers
  t.equal(headers['x-forwarded-issuer'], other.issuer)
  t.equal(jose.decodeJwt(headers['x-identity-assertion'] as string).idp, other.issuer, "the assertion's idp")
}

for (const store of ['cookie', 'memory', 'redis'] as const) {
  t.test(`${store} store: a reload that re-points the provider at another issuer ends its sessions`, (t) => rePointed(t, store))
}

t.test('a session sealed before the issuer was recorded: of the issuer the gateway started with, until a reload re-points its provider', async (t) => {
  const stack = await startStack(t, { config: { session: { store: 'cookie' } } })
  const other = await startDevProvider({
    clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUris: [`${stack.gw}/api/v1/openid/callback`] }],
  })
  t.teardown(() => other.close())
  // Sealed as an earlier release sealed it: no issuer.
  const store = new CookieSessionStore(
    new GatewayCookies(stack.config.cookies, new CookieCipher(stack.config.cookies.secrets, systemClock)),
    stack.config.session.maxAgeSeconds,
    systemClock,
  )
  const now = Math.floor(Date.now() / 1000)
  const jar: Record<string, string> = {}
  const reply = { setCookie: (name: string, value: string) => void (jar[name] = value) }
  await store.create({ url: '/', cookies: {} }, reply, {
    id: 'legacy-carol',
    claims: { sub: 'carol' },
    accessToken: 'legacy-at',
    expiresAt: now + 3600,
    createdAt: now,
    provider: 'default',
  })
  const cookie = Object.entries(jar)
    .map(([name, value]) => `${name}=${value}`)
    .join('; ')

  const before = await rawRequest(stack.gw, '/page', { headers: { ...JSON_ACCEPT, cookie } })
  t.equal(before.status, 200, 'an upgrade signs no one out')
  t.equal(before.json<{ headers: Record<string, string> }>().headers['x-forwarded-issuer'], stack.provider!.issuer)
  stack.replicas[0]!.rewrite((c) => ({ ...c, provider: { ...(c.provider as object), issuer: other.issuer } }))
  t.equal(await stack.live.reload('SIGHUP'), true)
  t.equal((await rawRequest(stack.gw, '/page', { headers: { ...JSON_ACCEPT, cookie } })).status, 401, 'ended by the re-pointing reload')
})
