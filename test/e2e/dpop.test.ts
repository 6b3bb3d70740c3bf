// provider.dpop (RFC 9449) against a real oidc-provider that requires DPoP-bound tokens of the
// gateway's client: the session's key binds the sign-in's and every refresh's tokens.

import t, { type Test } from 'tap'
import { startAdversarialStack } from '../fixtures/adversarial-provider.ts'
import { problems } from '../fixtures/config/base.ts'
import { problemCode } from '../fixtures/http.ts'
import { assertRefusedAtDiscovery, CLIENT_ID, CLIENT_SECRET, startStack, type Stack, type StackOptions, type Teardown } from '../fixtures/stack.ts'
import type { Browser } from '../fixtures/browser.ts'

const JSON_ACCEPT = { accept: 'application/json' }

function dpopStack(t: Teardown, options: StackOptions = {}): Promise<Stack> {
  return startStack(t, {
    ...options,
    provider: { rotateRefreshTokens: true, ...options.provider },
    client: { dpopBoundAccessTokens: true },
    config: { provider: { dpop: true }, ...options.config },
  })
}

async function metadata(stack: Stack): Promise<Record<string, string>> {
  return (await (await fetch(`${stack.provider?.issuer}/.well-known/openid-configuration`)).json()) as Record<string, string>
}

/** What the provider knows of an access token (RFC 7662), asked as the gateway's client. */
async function introspect(stack: Stack, token: string): Promise<Record<string, unknown>> {
  const res = await fetch((await metadata(stack)).introspection_endpoint ?? '', {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString('base64')}` },
    body: new URLSearchParams({ token }),
  })
  return (await res.json()) as Record<string, unknown>
}

async function signIn(stack: Stack, browser: Browser): Promise<string> {
  const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
  if (res.status !== 200) throw new Error(`sign-in answered ${res.status}: ${await res.text()}`)
  return ((await res.json()) as { value: string }).value
}

async function refresh(t: Test, browser: Browser, gw: string): Promise<string> {
  const res = await browser.fetch(`${gw}/api/v1/openid/refresh`)
  t.equal(res.status, 200, 'refreshed')
  return ((await res.json()) as { value: string }).value
}

function tokenCalls(metrics: string): number {
  return Number(/openid_gateway_provider_request_duration_seconds_count\{call="token"\} (\d+)/.exec(metrics)?.[1] ?? 0)
}

t.test("the sign-in and every refresh bind the tokens to the session's key", async (t) => {
  const stack = await dpopStack(t)
  const browser = stack.browser()
  const first = await signIn(stack, browser)
  const bound = await introspect(stack, first)
  t.equal(bound.active, true)
  t.equal(bound.token_type, 'DPoP')
  const jkt = (bound.cnf as { jkt?: string } | undefined)?.jkt
  t.type(jkt, 'string', 'cnf.jkt: bound to a key')
  t.equal((await browser.fetch(`${stack.gw}/x`, { headers: JSON_ACCEPT })).status, 200, 'the session works')
  const second = await refresh(t, browser, stack.gw)
  t.not(second, first)
  t.equal(((await introspect(stack, second)) as { cnf?: { jkt?: string } }).cnf?.jkt, jkt, 'the refreshed token is bound to the same key')
  // Without a proof of the key, the token is worth nothing: the provider refuses it as Bearer.
  const userinfo = await fetch((await metadata(stack)).userinfo_endpoint ?? '', { headers: { authorization: `Bearer ${second}` } })
  t.equal(userinfo.status, 401)
  const other = stack.browser()
  const otherToken = await signIn(stack, other)
  t.not(((await introspect(stack, otherToken)) as { cnf?: { jkt?: string } }).cnf?.jkt, jkt, 'each sign-in has its own key')
})

t.test("DPoP-Nonce: the provider's nonce is learned once and used by every session's proofs", async (t) => {
  const stack = await dpopStack(t, { provider: { dpopNonces: true } })
  const browser = stack.browser()
  await signIn(stack, browser)
  // The first proof has no nonce: refused with use_dpop_nonce, retried with it.
  t.equal(tokenCalls(await stack.app.management.metrics.metrics()), 2)
  await refresh(t, browser, stack.gw)
  await signIn(stack, stack.browser())
  t.equal(tokenCalls(await stack.app.management.metrics.metrics()), 4, 'later grants carry the nonce at once')
})

t.test('refresh works on another replica: the key travels sealed in the session', async (t) => {
  const stack = await dpopStack(t, { replicas: 2, provider: { dpopNonces: true } })
  const browser = stack.browser()
  const first = await signIn(stack, browser)
  const jkt = ((await introspect(stack, first)) as { cnf?: { jkt?: string } }).cnf?.jkt
  const second = await refresh(t, browser, stack.replicas[1]?.gw ?? '')
  t.equal(((await introspect(stack, second)) as { cnf?: { jkt?: string } }).cnf?.jkt, jkt)
  t.equal((await browser.fetch(`${stack.replicas[1]?.gw}/x`, { headers: JSON_ACCEPT })).status, 200)
})

t.test('a provider that issues an unbound (Bearer) token: refused, 502 provider_unavailable', async (t) => {
  const { stack } = await startAdversarialStack(t, { provider: { dpopAlgs: ['ES256'] }, config: { provider: { dpop: true } } })
  const res = await stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
  t.equal(res.status, 502)
  t.equal(await problemCode(res), 'provider_unavailable')
  t.same(
    res.headers.getSetCookie().filter((line) => /^ogw=[^;]/.test(line)),
    [],
    'no session',
  )
})

t.test('a provider without ES256 DPoP proofs: not ready, 503 provider_misconfigured', async (t) => {
  for (const dpopAlgs of [undefined, ['EdDSA']]) {
    const lines: string[] = []
    const { stack } = await startAdversarialStack(t, {
      provider: dpopAlgs === undefined ? {} : { dpopAlgs },
      config: { provider: { dpop: true }, log: { level: 'warn' } },
      logStream: { write: (line) => void lines.push(line) },
      waitForProvider: false,
    })
    await assertRefusedAtDiscovery(t, stack.gw, lines, /dpop_signing_alg_values_supported/)
  }
})

t.test('forwardAccessToken is refused with provider.dpop, naming the key', async (t) => {
  t.strictSame(problems({ provider: { dpop: true }, upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', forwardAccessToken: true }] }), [
    'upstreams[0].forwardAccessToken: cannot be true with provider.dpop: DPoP-bound access tokens are not forwarded',
  ])
  t.strictSame(problems({ provider: { dpop: true } }), [])
})
