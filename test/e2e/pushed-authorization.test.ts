// provider.pushedAuthorizationRequests (RFC 9126) against a real oidc-provider.

import t, { type Test } from 'tap'
import { startAdversarialStack } from '../fixtures/adversarial-provider.ts'
import { problemCode } from '../fixtures/http.ts'
import { assertRefusedAtDiscovery, startStack, type Stack, type Teardown } from '../fixtures/stack.ts'
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
