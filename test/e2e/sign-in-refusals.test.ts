// Every refusal at sign-in names its cause to the operator in one warn line (which call, the URL
// without secrets, the HTTP status, the provider's error, the check that failed), and shows the
// user the right page: against the real dev provider, with the mistakes an operator makes.

import t from 'tap'
import { CLIENT_SECRET, freePort, startStack, type Stack } from '../fixtures/stack.ts'
import { startTestProvider } from '../fixtures/provider.ts'
import { manualClock } from '../fixtures/clock.ts'
import { eventually } from '../fixtures/poll.ts'
import { problemCode } from '../fixtures/http.ts'
import { readiness } from '#src/ops/management'

type Line = Record<string, unknown>

function capture(): { lines: string[]; parsed: () => Line[]; stream: { write(line: string): void } } {
  const lines: string[] = []
  return { lines, parsed: () => lines.map((l) => JSON.parse(l) as Line), stream: { write: (line) => void lines.push(line) } }
}

/** The warn lines (and above) logged for the request `reqId`. */
function warningsOf(lines: Line[], reqId: string): Line[] {
  return lines.filter((l) => l.reqId === reqId && typeof l.level === 'number' && l.level >= 40)
}

t.test('a wrong client secret: 502 provider_rejected_client, and one warn line naming invalid_client at the token endpoint', async (t) => {
  const log = capture()
  const stack = await startStack(t, {
    // The provider knows the gateway by another secret than the one it sends.
    client: { clientSecret: 'the-secret-registered-at-the-provider-0123456789' },
    config: { log: { level: 'warn' } },
    logStream: log.stream,
  })
  const browser = stack.browser()
  const callback = await browser.signIn(`${stack.gw}/api/v1/openid/redirect?redirectAfter=%2Fpage`, 'alice')
  t.equal(callback.status, 502)
  const html = await callback.text()
  t.match(html, 'Error 502 · provider_rejected_client')
  t.match(html, 'the gateway&#39;s provider settings are wrong')
  t.match(html, 'tell the administrator')
  t.notMatch(html, /code_invalid|already used or has expired/, 'never reported as a used or expired code')
  const requestId = /Request id: <code>([0-9a-f-]+)<\/code>/.exec(html)?.[1]
  t.ok(requestId, 'the page shows the request id')

  const lines = warningsOf(log.parsed(), requestId ?? '')
  t.equal(lines.length, 1, 'one line for the refusal, not one more for the 502')
  t.match(lines[0], {
    level: 40,
    msg: 'code exchange failed',
    call: 'token',
    problem: 'provider_rejected_client',
    error: 'invalid_client',
    error_description: String,
    status: 401,
    url: `${stack.provider?.issuer}/token`,
  })
  const text = log.lines.join('\n')
  t.notMatch(text, /test-client-secret|the-secret-registered/, 'no client secret in the log')
  // The secret sent is letters, digits and "-" (RFC 3986 2.3 unreserved): Basic sends it as it is,
  // so its encoding cannot be why it was refused, and no hint blames it.
  t.match(CLIENT_SECRET, /^[A-Za-z0-9-]+$/)
  t.notOk('hint' in (lines[0] ?? {}), 'no Basic-encoding hint for a secret of unreserved characters')
  t.notOk('basicEncoded' in (lines[0] ?? {}))
  const code = new URL(browser.history.find((u) => u.includes('/callback?')) ?? 'http://x').searchParams.get('code')
  t.ok(code)
  t.notOk(text.includes(code ?? '-'), 'no authorization code in the log')
})

t.test('invalid_client at refresh: 502 provider_rejected_client, logged once, the session kept', async (t) => {
  const log = capture()
  const stack = await startStack(t, { config: { log: { level: 'warn' } }, logStream: log.stream })
  const browser = await stack.signedIn('alice')
  // The operator breaks the secret in a reload; the sessions signed in before stay.
  stack.replicas[0]?.rewrite((config) => ({ ...config, provider: { ...(config.provider as object), clientSecret: 'a-wrong-secret-0123456789abcdef0123' } }))
  t.equal(await stack.live.reload('SIGHUP'), true)
  await stack.app.providersReady
  const res = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
  t.equal(res.status, 502)
  const problem = (await res.json()) as Record<string, unknown>
  t.match(problem, { code: 'provider_rejected_client', title: "OpenID provider rejected the gateway's client", requestId: String })
  t.same(res.headers.getSetCookie(), [], 'the session is kept: nothing the user did')
  const refusals = log.parsed().filter((l) => l.msg === 'refresh failed')
  t.equal(refusals.length, 1)
  t.match(refusals[0], {
    level: 40,
    call: 'refresh',
    problem: 'provider_rejected_client',
    error: 'invalid_client',
    status: 401,
    url: `${stack.provider?.issuer}/token`,
  })
  t.notOk(
    log.parsed().some((l) => l.code === 'provider_rejected_client'),
    'no second line from the error handler',
  )
  t.equal((await browser.fetch(`${stack.gw}/page`, { headers: { accept: 'application/json' } })).status, 200, 'still signed in')
})

t.test('an issuer mismatch (localhost against 127.0.0.1): logs both issuers; page and problem say misconfigured at once, not starting', async (t) => {
  const provider = await startTestProvider(t, { clients: [] })
  const configured = provider.issuer.replace('127.0.0.1', 'localhost')
  const log = capture()
  // The gateway's clock stands still: whatever it answers, notReadyPageAfterMs has not passed.
  const stack = await startStack(t, {
    issuer: configured,
    clock: manualClock(),
    config: { provider: { notReadyPageAfterMs: 60_000 }, log: { level: 'warn' } },
    logStream: log.stream,
  })
  const line = await eventually('the discovery failure', () => log.parsed().find((l) => l.msg === 'provider discovery failed'))
  t.match(line, {
    level: 40,
    call: 'discovery',
    issuer: configured,
    check: 'issuer',
    expectedIssuer: `${configured}/`,
    advertisedIssuer: provider.issuer,
  })
  const detail = `the gateway is misconfigured: the provider names another issuer, "${provider.issuer}", than provider.issuer "${configured}"; the two must be identical (OpenID Connect Discovery 1.0 section 4.3)`

  const res = await fetch(`${stack.gw}/api/v1/openid/redirect`)
  t.equal(res.status, 503)
  t.equal(res.headers.get('retry-after'), null, 'no Retry-After: waiting will not help')
  t.match(await res.json(), {
    code: 'provider_misconfigured',
    title: 'Gateway misconfigured for its OpenID provider',
    reason: 'issuer_mismatch',
    detail,
    requestId: String,
  })

  const page = await stack.browser().fetch(`${stack.gw}/api/v1/openid/redirect?redirectAfter=%2Fpage`, { navigate: true })
  t.equal(page.status, 503)
  const html = await page.text()
  t.match(html, 'Error 503 · provider_misconfigured')
  t.match(html, '<h1>The gateway is misconfigured</h1>')
  t.match(html, 'The identity provider names another issuer than the one the gateway is set up for')
  t.match(html, `&#34;${provider.issuer}&#34;, than provider.issuer &#34;${configured}&#34;`, 'the detail names both issuers')
  t.notMatch(html, /The gateway is starting|cannot be reached/)
  t.notMatch(html, 'http-equiv="refresh"', 'the page does not reload itself')
  t.match(html, /Request id: <code>[0-9a-f-]{36}<\/code>/)

  t.match(
    await readiness(stack.app.management.probes, false),
    { status: 'not_ready', failing: ['provider_metadata', 'provider_keys'] },
    'readiness stays not ready',
  )
})

t.test('a provider down after an issuer mismatch: the transient cause takes over, "starting" again', async (t) => {
  const provider = await startTestProvider(t, { clients: [] })
  const log = capture()
  // A still clock: notReadyPageAfterMs never passes, so the answer can only be "starting".
  const stack = await startStack(t, {
    issuer: provider.issuer.replace('127.0.0.1', 'localhost'),
    clock: manualClock(),
    config: { log: { level: 'warn' } },
    logStream: log.stream,
  })
  await eventually('the issuer mismatch', () => log.parsed().find((l) => l.msg === 'provider discovery failed' && l.check === 'issuer'))
  t.equal(await problemCode(await fetch(`${stack.gw}/api/v1/openid/redirect`)), 'provider_misconfigured')
  await provider.close()
  await eventually('a transient failure', () => log.parsed().find((l) => l.msg === 'provider discovery failed' && l.cause === 'ECONNREFUSED'))
  const res = await fetch(`${stack.gw}/api/v1/openid/redirect`)
  t.equal(res.status, 503)
  t.match(await res.json(), { code: 'not_ready', detail: /not loaded yet/ })
})

t.test('a wrong discovery path logs the URL and the HTTP status', async (t) => {
  const provider = await startTestProvider(t, { clients: [] })
  const issuer = `${provider.issuer}/realms/wrong`
  const log = capture()
  await startStack(t, { issuer, config: { log: { level: 'warn' } }, logStream: log.stream })
  const line = await eventually('the discovery failure', () => log.parsed().find((l) => l.msg === 'provider discovery failed'))
  t.match(line, { level: 40, call: 'discovery', url: `${issuer}/.well-known/openid-configuration`, status: 404 })
})

t.test('a provider down past notReadyPageAfterMs: the not-ready page says it is unreachable, with the request id', async (t) => {
  const issuer = `http://127.0.0.1:${await freePort()}`
  const clock = manualClock()
  const log = capture()
  const stack: Stack = await startStack(t, {
    issuer,
    clock,
    config: { provider: { notReadyPageAfterMs: 60_000 }, log: { level: 'warn' } },
    logStream: log.stream,
  })
  const line = await eventually('the discovery failure', () => log.parsed().find((l) => l.msg === 'provider discovery failed'))
  t.match(line, { call: 'discovery', url: `${issuer}/.well-known/openid-configuration`, cause: 'ECONNREFUSED' })

  const browser = stack.browser()
  const page = async (): Promise<string> => {
    const res = await browser.fetch(`${stack.gw}/api/v1/openid/redirect?redirectAfter=%2Fpage`, { navigate: true })
    t.equal(res.status, 503)
    return res.text()
  }
  const early = await page()
  t.match(early, 'The gateway is starting')
  t.notMatch(early, 'cannot be reached')

  clock.advance(59_999)
  t.match(await page(), 'The gateway is starting', 'not before notReadyPageAfterMs')
  clock.advance(1)
  const late = await page()
  t.match(late, 'Error 503 · not_ready')
  t.match(late, 'The identity provider cannot be reached')
  t.notMatch(late, 'The gateway is starting')
  t.match(late, /Request id: <code>[0-9a-f-]{36}<\/code>/)

  const api = await fetch(`${stack.gw}/api/v1/openid/redirect`)
  t.equal(api.status, 503)
  t.match(await api.json(), { code: 'not_ready', reason: 'provider_unreachable', requestId: String, detail: /unreachable for 60 s/ })
})
