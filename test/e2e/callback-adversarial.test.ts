import t from 'tap'
import {
  cookiesCleared,
  sessionCookiesSet,
  startAdversarialStack,
  SUBJECT,
  type AdversarialProvider,
  type Behaviour,
} from '../fixtures/adversarial-provider.ts'
import type { Browser } from '../fixtures/browser.ts'
import { CLIENT_ID, CLIENT_SECRET, type Stack } from '../fixtures/stack.ts'

// The callback against a provider that lies, breaks or stalls. Every refusal must leave the
// browser without a session; every provider fault must be a 502 (the user did nothing wrong),
// answered within provider.timeoutMs.

/** A subtest's `t` (the last overload of t.test takes only the callback). */
type Test = Parameters<Parameters<typeof t.test>[0]>[0]

const now = (): number => Math.floor(Date.now() / 1000)

interface Outcome {
  res: Response
  browser: Browser
  ms: number
}

/** A complete sign-in: /redirect, the provider's /authorize (no form: it redirects at once), the callback. */
async function signIn(stack: Stack): Promise<Outcome> {
  const browser = stack.browser()
  const started = Date.now()
  const res = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'unused')
  return { res, browser, ms: Date.now() - started }
}

async function assertRefused(t: Test, { res, browser }: Outcome, status: number, code: string): Promise<void> {
  t.equal(res.status, status, 'status')
  // The callback is a browser navigation: the refusal is the error page (pages/error-page.ts).
  t.match(res.headers.get('content-type'), /^text\/html/, 'an error page')
  const text = await res.text()
  t.match(text, `Error ${status} · ${code}`, 'status and problem code on the page')
  const callback = browser.history.find((u) => u.includes('/api/v1/openid/callback?'))
  const authorizationCode = callback === undefined ? null : new URL(callback).searchParams.get('code')
  if (authorizationCode !== null) t.notOk(text.includes(authorizationCode), 'the authorization code is not echoed')
  t.same(sessionCookiesSet(res), [], 'no session cookie is set')
  t.notOk(
    browser.cookies().some((c) => c.name === 'ogw' || c.name.startsWith('ogw_cred') || /^ogw_\d+$/.test(c.name)),
    'the browser holds no session cookie',
  )
}

/** A refused code or ID token ends the transaction (sign-in.ts): the cookie is expired. */
function assertTransactionCleared(t: Test, { res, browser }: Outcome): void {
  t.equal(cookiesCleared(res, 'ogw_tx_').length, 1, 'the transaction cookie is expired')
  t.notOk(
    browser.cookies().some((c) => c.name.startsWith('ogw_tx_')),
    'no transaction cookie left',
  )
}

/** A provider fault leaves the transaction for a retry (sign-in.ts): the cookie is untouched. */
function assertTransactionKept(t: Test, { res, browser }: Outcome): void {
  t.same(cookiesCleared(res, 'ogw_tx_'), [], 'the transaction cookie is not expired')
  t.ok(
    browser.cookies().some((c) => c.name.startsWith('ogw_tx_')),
    'the transaction cookie is kept',
  )
}

async function assertSignedIn(t: Test, stack: Stack, provider: AdversarialProvider, outcome: Outcome): Promise<void> {
  t.equal(outcome.res.status, 200, 'status')
  const body = (await outcome.res.json()) as { value: string }
  t.equal(body.value, provider.lastAccessToken, 'the access token')
  t.ok(sessionCookiesSet(outcome.res).includes('ogw'), 'session cookie set')
  const page = await outcome.browser.fetch(`${stack.gw}/whoami`, { headers: { accept: 'application/json' } })
  t.equal(page.status, 200, 'a proxied request is signed in')
  t.equal(stack.upstream.requests.at(-1)?.headers['x-forwarded-user'], SUBJECT)
}

t.test('bad ID tokens: 403 id_token_invalid, no session, the log names the failed check', async (t) => {
  const lines: Array<Record<string, unknown>> = []
  const { stack, provider } = await startAdversarialStack(t, {
    config: { log: { level: 'warn' } },
    logStream: { write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
  })
  t.beforeEach(() => provider.reset())

  t.test('control: a valid ID token signs in', async (t) => {
    await assertSignedIn(t, stack, provider, await signIn(stack))
  })

  t.test('control: aud with another audience is accepted when azp is this client', async (t) => {
    provider.set({ idTokenClaims: { aud: [CLIENT_ID, 'another-client'], azp: CLIENT_ID } })
    await assertSignedIn(t, stack, provider, await signIn(stack))
  })

  t.test('auth_time 0 (Glewlwyd 2.7): signed in, the time unknown, no X-Forwarded-Auth-Time', async (t) => {
    provider.set({ idTokenClaims: { auth_time: 0 } })
    await assertSignedIn(t, stack, provider, await signIn(stack))
    t.notOk('x-forwarded-auth-time' in (stack.upstream.requests.at(-1)?.headers ?? {}), 'not forwarded as a sign-in in 1970')
    provider.reset()
    await assertSignedIn(t, stack, provider, await signIn(stack))
    t.match(stack.upstream.requests.at(-1)?.headers['x-forwarded-auth-time'], /^\d{10}$/, 'control: a plausible one is')
  })

  t.test('no kid in the header and a single published key: accepted', async (t) => {
    provider.set({ idToken: 'no-kid' })
    await assertSignedIn(t, stack, provider, await signIn(stack))
  })

  // The third member is the check the log line names.
  const cases: Array<[string, () => Partial<Behaviour>, string]> = [
    ['iss of another issuer', () => ({ idTokenClaims: { iss: 'http://127.0.0.1:1/evil' } }), 'iss'],
    ['iss missing', () => ({ idTokenClaims: { iss: undefined } }), 'iss'],
    ['aud not containing the client', () => ({ idTokenClaims: { aud: 'another-client' } }), 'aud'],
    ['aud array with the client and another, no azp', () => ({ idTokenClaims: { aud: [CLIENT_ID, 'another-client'] } }), 'aud'],
    [
      'aud array with the client and another, azp another client',
      () => ({ idTokenClaims: { aud: [CLIENT_ID, 'another-client'], azp: 'another-client' } }),
      'azp',
    ],
    // Core 3.1.3.7 step 5: when azp is present it must be this client, whatever aud holds.
    ['azp of another client with aud = the client', () => ({ idTokenClaims: { azp: 'another-client' } }), 'azp'],
    ['exp an hour ago', () => ({ idTokenClaims: { iat: now() - 7200, exp: now() - 3600 } }), 'exp'],
    ['iat an hour in the future', () => ({ idTokenClaims: { iat: now() + 3600, exp: now() + 7200 } }), 'iat'],
    ['nonce of another transaction', () => ({ idTokenClaims: { nonce: 'another-nonce' } }), 'nonce'],
    ['nonce missing', () => ({ idTokenClaims: { nonce: undefined } }), 'nonce'],
    ['sub missing', () => ({ idTokenClaims: { sub: undefined } }), 'sub'],
    ['sub empty', () => ({ idTokenClaims: { sub: '' } }), 'sub'],
    ['sub a number', () => ({ idTokenClaims: { sub: 123 } }), 'sub'],
    ['at_hash of another access token', () => ({ idTokenClaims: { at_hash: 'AAAAAAAAAAAAAAAAAAAAAA' } }), 'at_hash'],
    ['alg none, unsigned', () => ({ idToken: 'alg-none' }), 'alg'],
    ['HS256 with the public key as HMAC secret', () => ({ idToken: 'hs256-public-key' }), 'alg'],
    ['signed by an unpublished key with an unknown kid', () => ({ idToken: 'unknown-key' }), 'signature'],
    ["signed by an unpublished key claiming the published key's kid", () => ({ idToken: 'unknown-key-same-kid' }), 'signature'],
    ['no id_token in the token response', () => ({ idToken: 'omit' }), 'missing'],
    ['id_token that is not a JWT', () => ({ idToken: 'garbage' }), 'malformed'],
    ['id_token whose segments are not JSON', () => ({ idToken: 'garbage-segments' }), 'malformed'],
  ]
  for (const [name, behaviour, check] of cases) {
    t.test(name, async (t) => {
      provider.set(behaviour())
      const before = provider.tokenRequests
      const logged = lines.length
      const outcome = await signIn(stack)
      t.equal(provider.tokenRequests, before + 1, 'the code was redeemed')
      await assertRefused(t, outcome, 403, 'id_token_invalid')
      assertTransactionCleared(t, outcome)
      const refusals = lines.slice(logged).filter((l) => l.msg === 'ID token refused')
      t.equal(refusals.length, 1, 'one log line')
      t.equal(refusals[0]?.check, check, `the log names the check: ${String(refusals[0]?.reason)}`)
      t.notMatch(JSON.stringify(refusals), /eyJ|adversary-user/, 'neither the token nor its claims are logged')
    })
  }
  // The clocks named: a refusal on iat, exp or nbf says which clock, by how much when the token
  // response's Date header measures it, and the key of the tolerance.
  const clocks: Array<[name: string, behaviour: Partial<Behaviour>, check: string, words: RegExp, offset: number | undefined]> = [
    [
      "the provider's clock an hour ahead",
      { clockAheadSeconds: 3600 },
      'iat',
      /iat \(issued at\) is in the future by the gateway's clock: the provider's clock is 3[56]\d\d s ahead of the gateway's/,
      3600,
    ],
    [
      "the provider's clock an hour behind",
      { clockAheadSeconds: -3600 },
      'exp',
      /exp \(expiry\) has passed by the gateway's clock: the provider's clock is 3\d\d\d s behind the gateway's/,
      -3600,
    ],
    ['clocks agree, the token expired', { idTokenClaims: { iat: now() - 7200, exp: now() - 3600 } }, 'exp', /Date header agrees with the gateway's clock/, 0],
  ]
  for (const [name, behaviour, check, words, offset] of clocks) {
    t.test(`${name}: the page and the log name the clock, the offset and provider.clockToleranceSeconds`, async (t) => {
      provider.set(behaviour)
      const logged = lines.length
      const outcome = await signIn(stack)
      t.equal(outcome.res.status, 403)
      const html = await outcome.res.text()
      t.match(html, 'Error 403 · id_token_invalid')
      t.match(html, 'The identity provider&#39;s clock and the gateway&#39;s disagree', 'the page says clocks')
      t.match(html.replaceAll('&#39;', "'"), words, 'the page names the clock and the offset')
      t.match(html, 'provider.clockToleranceSeconds (30 s)')
      const refusal = lines.slice(logged).find((l) => l.msg === 'ID token refused')
      t.equal(refusal?.check, check)
      t.match(refusal?.hint, words, 'the log says it in words')
      t.equal(refusal?.clockToleranceSeconds, 30)
      t.ok(
        offset !== undefined && Math.abs(Number(refusal?.providerClockOffsetSeconds) - offset) <= 2,
        `the measured offset: ${String(refusal?.providerClockOffsetSeconds)}`,
      )
    })
  }
})

t.test('no kid in the header with two published keys: 403 id_token_invalid', async (t) => {
  // Which key signed is ambiguous: the token must not be accepted by trying keys until one fits.
  const { stack, provider } = await startAdversarialStack(t, { provider: { behaviour: { publishSecondKey: true } } })
  await assertSignedIn(t, stack, provider, await signIn(stack))
  provider.set({ idToken: 'no-kid' })
  const outcome = await signIn(stack)
  await assertRefused(t, outcome, 403, 'id_token_invalid')
  assertTransactionCleared(t, outcome)
})

t.test(
  'authorization response from another issuer, or without the iss it advertises (RFC 9207 2.4): 403 authorization_response_invalid, the code is never redeemed',
  async (t) => {
    const lines: string[] = []
    const { stack, provider } = await startAdversarialStack(t, { config: { log: { level: 'warn' } }, logStream: { write: (line) => lines.push(line) } })
    t.beforeEach(() => provider.reset())
    const cases: Array<[name: string, iss: string | null, rule: string]> = [
      ['iss of another issuer', 'http://127.0.0.1:1/evil', 'rfc9207-iss-mismatch'],
      ['iss empty', '', 'rfc9207-iss-mismatch'],
      ['iss missing, though the provider advertises it', null, 'rfc9207-iss-missing'],
    ]
    for (const [name, iss, rule] of cases) {
      t.test(name, async (t) => {
        provider.set({ authorizationIss: iss })
        const before = provider.tokenRequests
        lines.length = 0
        const outcome = await signIn(stack)
        t.equal(provider.tokenRequests, before, 'the code is not sent to the token endpoint')
        await assertRefused(t, outcome, 403, 'authorization_response_invalid')
        assertTransactionCleared(t, outcome)
        const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'authorization response refused')
        t.equal(logged?.rule, rule, 'the log names the rule')
        t.notOk(
          lines.some((l) => l.includes('ID token refused')),
          'not reported as an ID token problem',
        )
      })
    }
  },
)

t.test('a provider that does not advertise iss: a response without it is accepted (RFC 9207 2.4)', async (t) => {
  const { stack, provider } = await startAdversarialStack(t, { provider: { issParameter: false } })
  await assertSignedIn(t, stack, provider, await signIn(stack))
})

t.test('token endpoint refusals and faults', async (t) => {
  const timeoutMs = 500
  const bound = timeoutMs + 1500
  const { stack, provider } = await startAdversarialStack(t, { config: { provider: { timeoutMs } } })
  t.beforeEach(() => provider.reset())

  t.test('control: the provider answers within the timeout', async (t) => {
    await assertSignedIn(t, stack, provider, await signIn(stack))
  })

  t.test('invalid_grant: 403 code_invalid', async (t) => {
    provider.set({ tokenFault: 'invalid_grant' })
    const outcome = await signIn(stack)
    await assertRefused(t, outcome, 403, 'code_invalid')
    assertTransactionCleared(t, outcome)
  })

  // The gateway's own credentials refused (in the body, or in a WWW-Authenticate challenge): a
  // configuration fault, never the user's code (CONTRACT.md, callback).
  for (const fault of ['invalid_client', 'invalid_client_challenge'] as const) {
    t.test(`${fault}: 502 provider_rejected_client`, async (t) => {
      provider.set({ tokenFault: fault })
      const outcome = await signIn(stack)
      await assertRefused(t, outcome, 502, 'provider_rejected_client')
      assertTransactionKept(t, outcome)
    })
  }

  for (const fault of ['server_error', 'html_503', 'redirect', 'html_200', 'wrong_content_type', 'hang', 'enormous'] as const) {
    t.test(`${fault}: 502 provider_unavailable within ${bound} ms`, async (t) => {
      provider.set({ tokenFault: fault })
      const outcome = await signIn(stack)
      t.ok(outcome.ms < bound, `answered in ${outcome.ms} ms`)
      await assertRefused(t, outcome, 502, 'provider_unavailable')
      assertTransactionKept(t, outcome)
    })
  }
})

t.test('token endpoint unreachable (closed port): 502 provider_unavailable', async (t) => {
  const timeoutMs = 500
  const { stack, provider } = await startAdversarialStack(t, { config: { provider: { timeoutMs } } })
  const browser = stack.browser()
  const toProvider = await browser.fetch(`${stack.gw}/api/v1/openid/redirect`)
  t.equal(toProvider.status, 302)
  const toCallback = await browser.fetch(toProvider.headers.get('location') ?? '')
  t.equal(toCallback.status, 302)
  await provider.close()
  const started = Date.now()
  const res = await browser.fetch(toCallback.headers.get('location') ?? '', { navigate: true })
  const outcome = { res, browser, ms: Date.now() - started }
  t.ok(outcome.ms < timeoutMs + 1500, `answered in ${outcome.ms} ms`)
  await assertRefused(t, outcome, 502, 'provider_unavailable')
  assertTransactionKept(t, outcome)
})

t.test(
  'a provider that does not decode Basic (Glewlwyd 2.7): a secret of unreserved characters signs in; one the encoding changes is refused, the log names it, never its value, and client_secret_post signs in',
  async (t) => {
    // The stack's secret is made of letters, digits and "-" only: sent as it is (RFC 3986 2.3).
    t.match(CLIENT_SECRET, /^[A-Za-z0-9-]+$/)
    const plain = await startAdversarialStack(t, { provider: { basicDecodes: false } })
    await assertSignedIn(t, plain.stack, plain.provider, await signIn(plain.stack))

    // "+", "/" and ":" are encoded (%2B, %2F, %3A): the provider compares another text.
    const secret = 'glewlwyd+secret/with:0123456789'
    const lines: Array<Record<string, unknown>> = []
    const { stack } = await startAdversarialStack(t, {
      provider: { basicDecodes: false, clientSecret: secret },
      config: { provider: { clientSecret: secret }, log: { level: 'warn' } },
      logStream: { write: (line) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    })
    const outcome = await signIn(stack)
    await assertRefused(t, outcome, 502, 'provider_rejected_client')
    const refused = lines.find((l) => l.msg === 'code exchange failed')
    t.equal(refused?.error, 'invalid_client')
    t.same(refused?.basicEncoded, ['clientSecret'], 'the secret is the one the encoding changes')
    t.match(refused?.hint, /RFC 6749 2\.3\.1.*"\+" as "%2B".*provider\.clientAuthMethod: client_secret_post/)
    t.notOk(JSON.stringify(lines).includes(secret), 'the secret is not logged')
    t.notOk(JSON.stringify(lines).includes('glewlwyd%2Bsecret'), 'nor its encoding')

    const post = await startAdversarialStack(t, {
      provider: { basicDecodes: false, clientSecret: secret },
      config: { provider: { clientSecret: secret, clientAuthMethod: 'client_secret_post' } },
    })
    await assertSignedIn(t, post.stack, post.provider, await signIn(post.stack))
  },
)
