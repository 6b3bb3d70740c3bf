import t, { type Test } from 'tap'
import { sessionCookiesSet, startAdversarialProvider } from '../fixtures/adversarial-provider.ts'
import { problemCode } from '../fixtures/http.ts'
import { startStack } from '../fixtures/stack.ts'

// The OAuth mix-up attack (RFC 9700 4.4.1) against a gateway with two providers: `honest`, a real
// oidc-provider, and `evil`, a provider that forwards the user's sign-in to the honest one
// (adversarial-provider.ts `mixUp`) to get the honest provider's code sent to its own token
// endpoint. The defences (oidc/authorization-response.ts): a redirect URI per provider (RFC 9700
// 4.4.2), checked against the transaction's provider, and RFC 9207's iss.

async function mixUpStack(t: Test) {
  // The attacker writes its own metadata: it does not advertise RFC 9207, or a response without
  // iss would be refused for that alone.
  const evil = await startAdversarialProvider({ issParameter: false })
  t.teardown(() => evil.close())
  // The honest provider also accepts the single-provider callback, as it would for an operator who
  // added a second provider and kept the first registration.
  // The honest provider predates RFC 9207 (sends no iss), as many do: the redirect URI is then
  // the only defence.
  const stack = await startStack(t, {
    providers: ['honest'],
    provider: { issParameter: false },
    extraProviders: [{ name: 'evil', issuer: evil.issuer }],
    upstreams: [{ name: 'app', providers: ['*'] }],
    extraRedirectPaths: ['/api/v1/openid/callback'],
  })
  return { stack, evil }
}

t.test('each provider has its own redirect URI, and signs in there', async (t) => {
  const evil = await startAdversarialProvider()
  t.teardown(() => evil.close())
  const stack = await startStack(t, {
    providers: ['honest'],
    extraProviders: [{ name: 'evil', issuer: evil.issuer }],
    upstreams: [{ name: 'app', providers: ['*'] }],
  })
  for (const name of ['honest', 'evil']) {
    const res = await fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=0&provider=${name}`)
    const body = await res.text()
    t.equal(res.status, 200, `${name}: ${body}`)
    const { value } = JSON.parse(body) as { value: string }
    t.equal(new URL(value).searchParams.get('redirect_uri'), `${stack.gw}/api/v1/openid/callback/${name}`, `${name}: its own callback`)
  }
  const browser = stack.browser()
  const honest = await browser.signIn(`${stack.gw}/api/v1/openid/redirect?provider=honest`, 'alice')
  t.equal(honest.status, 200, 'a sign-in at the honest provider finishes on /callback/honest')
  const other = stack.browser()
  const atEvil = await other.signIn(`${stack.gw}/api/v1/openid/redirect?provider=evil`, 'unused')
  t.equal(atEvil.status, 200, 'and one at the other provider on /callback/evil')
})

for (const path of ['/api/v1/openid/callback', '/api/v1/openid/callback/honest']) {
  t.test(
    `mix-up: the honest provider's code for a sign-in started at the evil one, returned to ${path}: 403 authorization_response_invalid, no token request`,
    async (t) => {
      const { stack, evil } = await mixUpStack(t)
      const honest = stack.providers[0]
      if (honest === undefined) throw new Error('no honest provider')
      const metadata = (await (await fetch(`${honest.issuer}/.well-known/openid-configuration`)).json()) as { authorization_endpoint: string }
      evil.set({ mixUp: { authorizationEndpoint: metadata.authorization_endpoint, redirectUri: stack.gw + path } })

      const victim = stack.browser()
      const res = await victim.signIn(`${stack.gw}/api/v1/openid/redirect?provider=evil`, 'alice')
      const callback = victim.history.find((u) => u.startsWith(`${stack.gw}${path}?`))
      t.ok(callback !== undefined && new URL(callback).searchParams.has('code'), 'the honest provider sent its code to the gateway')
      t.equal(evil.tokenRequests, 0, "the honest provider's code never reaches the evil provider's token endpoint")
      t.equal(res.status, 403)
      t.equal(await problemCode(res), 'authorization_response_invalid')
      t.same(sessionCookiesSet(res), [], 'no session')
    },
  )
}
