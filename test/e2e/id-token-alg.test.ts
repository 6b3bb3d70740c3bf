import * as jose from 'jose'
import t from 'tap'
import { idTokenSigningAlgs } from '#src/oidc/algorithms'
import {
  sessionCookiesSet,
  startAdversarialProvider,
  startAdversarialStack,
  SUBJECT,
  type Problem,
  type ProviderOptions,
} from '../fixtures/adversarial-provider.ts'
import { problemCode, rawRequest } from '../fixtures/http.ts'
import { discoveryFailure, startStack, type Stack } from '../fixtures/stack.ts'

// ID tokens are accepted in every asymmetric algorithm the provider advertises
// (id_token_signing_alg_values_supported), or in those provider.idTokenAlgorithms pins; never in
// none or HS*. A refusal says in the log which check failed.

type Line = Record<string, unknown>

async function signIn(stack: Stack): Promise<Response> {
  return stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')
}

t.test('the algorithms taken from id_token_signing_alg_values_supported', async (t) => {
  const cases: Array<[unknown, string[]]> = [
    [undefined, ['RS256']],
    [[], ['RS256']],
    ['RS256', ['RS256']],
    [['RS256'], ['RS256']],
    [
      ['ES256', 'RS256'],
      ['ES256', 'RS256'],
    ],
    [
      ['RS256', 'PS256'],
      ['RS256', 'PS256'],
    ],
    [
      ['HS256', 'none', 'PS384', 'ES256', 'PS384'],
      ['PS384', 'ES256'],
    ],
    [['EdDSA'], ['EdDSA']],
    [['HS256', 'HS512', 'none'], []],
    [['none'], []],
    [['A256GCM', 'dir', 42, null], []],
  ]
  for (const [advertised, expected] of cases) t.same(idTokenSigningAlgs(advertised), expected, JSON.stringify(advertised) ?? 'absent')
  t.same(idTokenSigningAlgs(['RS256', 'PS256'], ['PS256']), ['PS256'], 'pinned')
  t.same(idTokenSigningAlgs(['RS256'], ['ES256', 'PS256']), ['ES256', 'PS256'], 'pinned, even when not advertised')
  t.same(idTokenSigningAlgs(['HS256'], ['RS256']), ['RS256'])
  t.same(idTokenSigningAlgs(['RS256', 'ES256'], []), ['RS256', 'ES256'], 'an empty pin (not accepted by the schema) pins nothing')
})

t.test('providers signing with any algorithm they advertise: sign-in works', async (t) => {
  const providers: Array<[string, ProviderOptions, Record<string, unknown>?]> = [
    ['ES256 only', { signingAlg: 'ES256' }],
    ['PS256 after HS256 and none', { signingAlg: 'PS256', advertisedAlgs: ['HS256', 'none', 'PS256'] }],
    ['EdDSA only', { signingAlg: 'EdDSA' }],
    ['advertises RS256 and PS256, signs PS256 (one RSA key)', { signingAlg: 'PS256', advertisedAlgs: ['RS256', 'PS256'] }],
    ['advertises RS256 and ES256, signs ES256', { signingAlg: 'ES256', advertisedAlgs: ['RS256', 'ES256'] }],
    ['pinned PS256, signs PS256', { signingAlg: 'PS256', advertisedAlgs: ['RS256', 'PS256'] }, { idTokenAlgorithms: ['PS256'] }],
  ]
  for (const [name, provider, pin] of providers) {
    t.test(name, async (t) => {
      const { stack } = await startAdversarialStack(t, { provider, ...(pin === undefined ? {} : { config: { provider: pin } }) })
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

t.test('the real dev provider signing ID tokens with PS256 or ES256: sign-in works by default', async (t) => {
  for (const alg of ['PS256', 'ES256'] as const) {
    t.test(alg, async (t) => {
      const stack = await startStack(t, { provider: { idTokenSigningAlg: alg } })
      const discovery = await fetch(`${stack.provider!.issuer}/.well-known/openid-configuration`)
      const advertised = ((await discovery.json()) as { id_token_signing_alg_values_supported: string[] }).id_token_signing_alg_values_supported
      t.ok(advertised.includes('RS256') && advertised.includes(alg), `the provider advertises RS256 and ${alg}: ${advertised.join(',')}`)
      const browser = await stack.signedIn('alice')
      const page = await browser.fetch(`${stack.gw}/whoami`, { headers: { accept: 'application/json' } })
      t.equal(page.status, 200, 'a proxied request is signed in')
      t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], 'alice')
      const logout = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
      const idToken = new URL(((await logout.json()) as { value: string }).value).searchParams.get('id_token_hint') ?? ''
      t.equal(jose.decodeProtectedHeader(idToken).alg, alg, `the ID token was signed with ${alg}`)
    })
  }
})

t.test('the real dev provider signing PS256 with RS256 pinned: 403, the log names the alg check', async (t) => {
  const lines: Line[] = []
  const stack = await startStack(t, {
    provider: { idTokenSigningAlg: 'PS256' },
    config: { log: { level: 'warn' }, provider: { idTokenAlgorithms: ['RS256'] } },
    logStream: { write: (line) => void lines.push(JSON.parse(line) as Line) },
  })
  const res = await stack.browser().signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
  t.equal(res.status, 403)
  t.equal(await problemCode(res), 'id_token_invalid')
  t.match(
    lines.filter((l) => l.msg === 'ID token refused'),
    [{ check: 'alg', grant: 'sign-in' }],
  )
  t.notMatch(JSON.stringify(lines), /eyJ/, 'no token in the log')
})

t.test('an ID token in an algorithm not accepted: 403 id_token_invalid, and the log names the alg check', async (t) => {
  const providers: Array<[string, ProviderOptions, Record<string, unknown>?]> = [
    ['advertises RS256, signs PS256 (same RSA key type)', { signingAlg: 'PS256', advertisedAlgs: ['RS256'] }],
    ['advertises RS256, signs ES256', { signingAlg: 'ES256', advertisedAlgs: ['RS256'] }],
    ['advertises ES256, signs ES384', { signingAlg: 'ES384', advertisedAlgs: ['ES256'] }],
    ['pinned RS256, advertises RS256 and PS256, signs PS256', { signingAlg: 'PS256', advertisedAlgs: ['RS256', 'PS256'] }, { idTokenAlgorithms: ['RS256'] }],
  ]
  for (const [name, provider, pin] of providers) {
    t.test(name, async (t) => {
      const lines: Line[] = []
      const { stack } = await startAdversarialStack(t, {
        provider,
        config: { log: { level: 'warn' }, ...(pin === undefined ? {} : { provider: pin }) },
        logStream: { write: (line) => void lines.push(JSON.parse(line) as Line) },
      })
      const res = await signIn(stack)
      t.equal(res.status, 403)
      t.equal(await problemCode(res), 'id_token_invalid')
      t.same(sessionCookiesSet(res), [], 'no session cookie')
      t.equal(stack.upstream.requests.length, 0)
      const refusals = lines.filter((l) => l.msg === 'ID token refused')
      t.equal(refusals.length, 1, 'one log line')
      t.match(refusals[0], { level: 40, check: 'alg', grant: 'sign-in', reason: /"alg"/ })
      t.ok(typeof refusals[0]?.reqId === 'string', 'on the request logger')
    })
  }
})

t.test('a pin naming no advertised algorithm: a warning at discovery', async (t) => {
  const lines: Line[] = []
  await startAdversarialStack(t, {
    provider: { signingAlg: 'RS256', advertisedAlgs: ['RS256'] },
    config: { log: { level: 'warn' }, provider: { idTokenAlgorithms: ['ES256'] } },
    logStream: { write: (line) => void lines.push(JSON.parse(line) as Line) },
  })
  t.match(lines, [{ level: 40, idTokenAlgorithms: ['ES256'], advertised: ['RS256'], msg: /provider\.idTokenAlgorithms names none/ }])
})

t.test('a provider advertising only HS256 and none: discovery fails, the gateway stays not ready: 503 provider_misconfigured', async (t) => {
  const provider = await startAdversarialProvider({ advertisedAlgs: ['HS256', 'none'] })
  t.teardown(() => provider.close())
  const lines: string[] = []
  const stack = await startStack(t, {
    issuer: provider.issuer,
    config: { log: { level: 'warn' } },
    logStream: { write: (line) => void lines.push(line) },
  })
  const line = await discoveryFailure(lines)
  t.ok(line, 'discovery failure logged')
  t.match(JSON.stringify(line?.err), /id_token_signing_alg_values_supported: \[\\"HS256\\",\\"none\\"\]/, 'the log names the advertised list')
  t.match(JSON.stringify(line?.err), /ProviderMetadataError/)
  const res = await rawRequest(stack.gw, '/api/v1/openid/redirect')
  t.equal(res.status, 503)
  t.match(res.json<Problem>(), {
    code: 'provider_misconfigured',
    reason: 'provider_metadata',
    detail: /^the gateway is misconfigured: the provider signs ID tokens only with/,
  })
  t.equal(provider.tokenRequests, 0)
  t.equal(provider.jwksRequests, 0, 'the keys of a refused provider are not even fetched')
})

t.test('the schema refuses none and HS* in provider.idTokenAlgorithms', async (t) => {
  for (const alg of ['none', 'HS256']) {
    await t.rejects(startStack(t, { config: { provider: { idTokenAlgorithms: [alg] } } }), /provider\.idTokenAlgorithms/, alg)
  }
})
