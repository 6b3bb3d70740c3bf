import t from 'tap'
import { idTokenSigningAlg } from '../../src/oidc/algorithms.js'
import {
  sessionCookiesSet,
  startAdversarialProvider,
  startAdversarialStack,
  SUBJECT,
  type Problem,
  type ProviderOptions,
} from '../fixtures/adversarial-provider.js'
import { problemCode, rawRequest } from '../fixtures/http.js'
import { startStack, type Stack } from '../fixtures/stack.js'

// Issue #3, point 1: the ID token `alg` is pinned to one algorithm the provider advertises
// (OpenID Connect Registration 2, id_token_signed_response_alg), chosen once after discovery.

async function signIn(stack: Stack): Promise<Response> {
  return stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')
}

t.test('the algorithm picked from id_token_signing_alg_values_supported', async (t) => {
  const cases: Array<[unknown, string | undefined]> = [
    [undefined, 'RS256'],
    [[], 'RS256'],
    [['RS256'], 'RS256'],
    [['ES256', 'RS256'], 'RS256'],
    [['ES256'], 'ES256'],
    [['HS256', 'none', 'PS384', 'ES256'], 'PS384'],
    [['EdDSA'], 'EdDSA'],
    [['HS256', 'HS512', 'none'], undefined],
    [['none'], undefined],
    [['A256GCM', 'dir'], undefined],
  ]
  for (const [advertised, expected] of cases) t.equal(idTokenSigningAlg(advertised), expected, JSON.stringify(advertised) ?? 'absent')
})

t.test('providers signing with what they advertise: sign-in works', async (t) => {
  const providers: Array<[string, ProviderOptions]> = [
    ['ES256 only', { signingAlg: 'ES256' }],
    ['PS256 after HS256 and none', { signingAlg: 'PS256', advertisedAlgs: ['HS256', 'none', 'PS256'] }],
    ['EdDSA only', { signingAlg: 'EdDSA' }],
  ]
  for (const [name, provider] of providers) {
    t.test(name, async (t) => {
      const { stack } = await startAdversarialStack(t, { provider })
      const browser = stack.browser()
      const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')
      t.equal(res.status, 200, 'signed in')
      t.ok(sessionCookiesSet(res).includes('ogw'), 'session cookie set')
      await res.arrayBuffer()
      const page = await browser.fetch(`${stack.gw}/whoami`, { headers: { accept: 'application/json' } })
      t.equal(page.status, 200, 'a proxied request is signed in')
      t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], SUBJECT)
    })
  }
})

t.test('an ID token in another alg than the pinned one: 403 id_token_invalid', async (t) => {
  const providers: Array<[string, ProviderOptions]> = [
    ['advertises RS256, signs PS256 (same RSA key type)', { signingAlg: 'PS256', advertisedAlgs: ['RS256'] }],
    ['advertises RS256, signs ES256', { signingAlg: 'ES256', advertisedAlgs: ['RS256'] }],
    // RS256 is listed, so RS256 is pinned: another listed alg is not enough any more.
    ['advertises RS256 and ES256, signs ES256', { signingAlg: 'ES256', advertisedAlgs: ['RS256', 'ES256'] }],
    ['advertises ES256, signs ES384', { signingAlg: 'ES384', advertisedAlgs: ['ES256'] }],
  ]
  for (const [name, provider] of providers) {
    t.test(name, async (t) => {
      const { stack } = await startAdversarialStack(t, { provider })
      const res = await signIn(stack)
      t.equal(res.status, 403)
      t.equal(await problemCode(res), 'id_token_invalid')
      t.same(sessionCookiesSet(res), [], 'no session cookie')
      t.equal(stack.upstream.requests.length, 0)
    })
  }
})

t.test('a provider advertising only HS256 and none: discovery fails, the gateway stays not_ready', async (t) => {
  const provider = await startAdversarialProvider({ advertisedAlgs: ['HS256', 'none'] })
  t.teardown(() => provider.close())
  const lines: string[] = []
  const stack = await startStack(t, {
    issuer: provider.issuer,
    config: { log: { level: 'warn' } },
    logStream: { write: (line) => void lines.push(line) },
  })
  const failure = async (): Promise<Record<string, unknown> | undefined> => {
    for (let i = 0; i < 50; i++) {
      const line = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'provider discovery failed')
      if (line !== undefined) return line
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    return undefined
  }
  const line = await failure()
  t.ok(line, 'discovery failure logged')
  t.match(JSON.stringify(line?.err), /id_token_signing_alg_values_supported: \[\\"HS256\\",\\"none\\"\]/, 'the log names the advertised list')
  t.match(JSON.stringify(line?.err), /ProviderMetadataError/)
  const res = await rawRequest(stack.gw, '/api/v1/openid/redirect')
  t.equal(res.status, 503)
  t.equal(res.json<Problem>().code, 'not_ready')
  t.equal(provider.tokenRequests, 0)
  t.equal(provider.jwksRequests, 0, 'the keys of a refused provider are not even fetched')
})
