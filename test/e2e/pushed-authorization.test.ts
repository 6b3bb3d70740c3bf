// provider.pushedAuthorizationRequests (RFC 9126) against a real oidc-provider.

import t, { type Test } from 'tap'
import { startAdversarialStack } from '../fixtures/adversarial-provider.ts'
import { problemCode } from '../fixtures/http.ts'
import { assertRefusedAtDiscovery, CLIENT_ID, CLIENT_SECRET, startStack, type Stack, type Teardown } from '../fixtures/stack.ts'
import { startTestProvider } from '../fixtures/provider.ts'
import type { DevProviderOptions } from '#src/dev/provider'

async function stackWith(t: Teardown, setting: string, provider: DevProviderOptions['pushedAuthorizationRequests']): Promise<Stack> {
  return startStack(t, { provider: { pushedAuthorizationRequests: provider }, config: { provider: { pushedAuthorizationRequests: setting } } })
}

async function authorizationUrl(stack: Stack): Promise<URL> {
  const res = await fetch(`${stack.gw}/api/v1/openid/redirect?performRedirect=false`)
  if (res.status !== 200) throw new Error(`redirect answered ${res.status}`)
  return new URL(((await res.json()) as { value: string }).value)
}

async function assertSignsIn(t: Test, stack: Stack): Promise<void> {
  const browser = await stack.signedIn('alice')
  const page = await browser.fetch(`${stack.gw}/x`, { headers: { accept: 'application/json' } })
  t.equal(page.status, 200, 'signed in through the provider')
}

for (const [setting, provider] of [
  ['required', 'on'],
  ['auto', 'required'],
  ['required', 'required'],
] as const) {
  t.test(`${setting}, provider PAR ${provider}: the URL carries only client_id and request_uri`, async (t) => {
    const stack = await stackWith(t, setting, provider)
    const url = await authorizationUrl(stack)
    t.strictSame([...url.searchParams.keys()].sort(), ['client_id', 'request_uri'])
    t.equal(url.searchParams.get('client_id'), 'gateway')
    t.match(url.searchParams.get('request_uri'), /^urn:ietf:params:oauth:request_uri:/)
    t.equal(`${url.origin}${url.pathname}`, `${stack.provider?.issuer}/auth`)
    await assertSignsIn(t, stack)
    t.match(await stack.app.management.metrics.metrics(), /openid_gateway_provider_request_duration_seconds_count\{call="par"\} 2/, 'two pushes, labelled par')
  })
}

t.test('auto, provider not requiring PAR: the classic authorization URL', async (t) => {
  const stack = await stackWith(t, 'auto', 'on')
  const url = await authorizationUrl(stack)
  t.equal(url.searchParams.get('code_challenge_method'), 'S256')
  t.ok(url.searchParams.get('state'))
  t.equal(url.searchParams.get('request_uri'), null)
  await assertSignsIn(t, stack)
})

t.test('a provider and a setting that cannot work together: not ready, 503 provider_misconfigured, never a sign-in without PAR', async (t) => {
  for (const [setting, provider] of [
    ['off', 'required'],
    ['required', 'off'],
  ] as const) {
    const lines: string[] = []
    const stack = await startStack(t, {
      provider: { pushedAuthorizationRequests: provider },
      config: { provider: { pushedAuthorizationRequests: setting }, log: { level: 'warn' } },
      logStream: { write: (line) => void lines.push(line) },
      waitForProvider: false,
    })
    t.comment(`${setting} against ${provider}`)
    await assertRefusedAtDiscovery(t, stack.gw, lines, /pushed authorization requests/)
  }
})

t.test('a push the provider refuses or fails: 502 provider_unavailable, logged with its error', async (t) => {
  for (const par of ['invalid_request', 'server_error'] as const) {
    const lines: string[] = []
    const { stack } = await startAdversarialStack(t, {
      provider: { fapi2: true, behaviour: { par } },
      config: { log: { level: 'warn' } },
      logStream: { write: (line) => void lines.push(line) },
    })
    const res = await fetch(`${stack.gw}/api/v1/openid/redirect`)
    t.equal(res.status, 502, par)
    t.equal(await problemCode(res), 'provider_unavailable')
    t.same(res.headers.getSetCookie(), [], 'no sign-in transaction is started')
    const line = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'pushed authorization request failed')
    t.ok(line, 'logged')
    t.match(line, { call: 'par', url: /\/par$/ }, 'with the call and its URL')
    if (par === 'invalid_request') t.match(line, { error: 'invalid_request', status: 400 }, "with the provider's error code")
    else t.match(line, { status: 500 })
  }
})

t.test(
  'a redirect URI the provider does not know, with PAR required: 502 provider_rejected_redirect_uri naming the URI, never "cannot be reached"',
  async (t) => {
    // oidc-provider with PAR required knows the gateway's client, registered with another callback.
    const registered = 'https://elsewhere.example/api/v1/openid/callback'
    const provider = await startTestProvider(t, {
      pushedAuthorizationRequests: 'required',
      clients: [{ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET, redirectUris: [registered] }],
    })
    const lines: string[] = []
    const stack = await startStack(t, {
      issuer: provider.issuer,
      config: { provider: { pushedAuthorizationRequests: 'required' }, log: { level: 'warn' } },
      logStream: { write: (line) => void lines.push(line) },
    })
    await stack.app.providersReady
    const sent = `${stack.gw}/api/v1/openid/callback`
    const detail = `the OpenID provider refused the gateway's redirect URI ${sent} (invalid_request): it must be registered at the provider as a redirect URI of client "${CLIENT_ID}", exactly`

    const res = await fetch(`${stack.gw}/api/v1/openid/redirect`)
    t.equal(res.status, 502)
    t.match(await res.json(), {
      code: 'provider_rejected_redirect_uri',
      title: "OpenID provider rejected the gateway's redirect URI",
      detail,
      redirectUri: sent,
      requestId: String,
    })
    t.same(res.headers.getSetCookie(), [], 'no sign-in transaction is started')

    const page = await stack.browser().fetch(`${stack.gw}/api/v1/openid/redirect?redirectAfter=%2Fpage`, { navigate: true })
    t.equal(page.status, 502)
    const html = await page.text()
    t.match(html, 'Error 502 · provider_rejected_redirect_uri')
    t.match(html, '<h1>Signing in is misconfigured</h1>')
    t.match(html, 'must be registered at the identity provider for this gateway')
    t.match(html, `redirect URI ${sent} (invalid_request)`, 'the page names the redirect URI sent')
    t.notMatch(html, 'cannot be reached')

    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.call === 'par')
    t.equal(logged.length, 2, 'one line per refusal')
    t.match(logged[0], {
      level: 40,
      msg: 'pushed authorization request failed: the provider refused the redirect URI',
      problem: 'provider_rejected_redirect_uri',
      redirectUri: sent,
      status: 400,
      // oidc-provider 9 answers a push with invalid_request (RFC 9126 2.3), its description naming redirect_uri.
      error: 'invalid_request',
      error_description: "redirect_uri did not match any of the client's registered redirect_uris",
    })
  },
)
