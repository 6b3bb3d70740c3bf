// Signing out while the provider is down: the session ends at the gateway, and the browser ends
// on the gateway's signed-out page saying the provider could not be told, not on a
// connection-refused page at the provider. Provider calls that fail log their transport cause.

import t from 'tap'
import { startStack, type Stack } from '../fixtures/stack.ts'
import { eventually } from '../fixtures/poll.ts'

type Line = Record<string, unknown>

async function stackWithLog(t: Parameters<typeof startStack>[0], provider: Record<string, unknown> = {}): Promise<{ stack: Stack; lines: () => Line[] }> {
  const lines: string[] = []
  const stack = await startStack(t, {
    config: { provider, log: { level: 'warn' } },
    logStream: { write: (line) => void lines.push(line) },
  })
  return { stack, lines: () => lines.map((l) => JSON.parse(l) as Line) }
}

t.test('provider stopped: DELETE logout ends the session and points to the signed-out page; the causes are logged', async (t) => {
  const { stack, lines } = await stackWithLog(t)
  const browser = await stack.signedIn('alice')
  const issuer = stack.provider?.issuer
  await stack.provider?.close()

  const res = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
  t.equal(res.status, 200)
  const { value } = (await res.json()) as { value: string }
  t.equal(value, `${stack.gw}/api/v1/openid/sign-out?provider=unreachable`, "the gateway's own page, not the provider's end-session")
  t.ok(
    res.headers.getSetCookie().some((c) => c.startsWith('ogw=;')),
    'the cookies are cleared',
  )
  t.equal((await browser.fetch(`${stack.gw}/page`, { headers: { accept: 'application/json' } })).status, 401, 'signed out')

  const page = await browser.fetch(value, { navigate: true })
  t.equal(page.status, 200)
  const html = await page.text()
  t.match(html, 'You are signed out')
  t.match(html, 'The identity provider could not be told')

  t.match(
    lines().find((l) => l.msg === 'refresh token revocation failed'),
    { level: 40, call: 'revocation', url: `${issuer}/token/revocation`, cause: 'ECONNREFUSED' },
  )
  t.match(
    lines().find((l) => l.call === 'end_session'),
    { level: 40, url: `${issuer}/session/end`, cause: 'ECONNREFUSED' },
  )
  t.notMatch(JSON.stringify(lines()), /id_token_hint|eyJ/, 'no token in the log')
})

t.test("provider stopped: the sign-out form ends on the gateway's page saying the provider could not be told", async (t) => {
  const { stack } = await stackWithLog(t)
  const browser = await stack.signedIn('alice')
  await stack.provider?.close()
  const res = await browser.fetch(`${stack.gw}/api/v1/openid/sign-out`, {
    method: 'POST',
    navigate: true,
    headers: { origin: stack.gw },
    body: new URLSearchParams(),
  })
  t.equal(res.status, 303)
  t.equal(res.headers.get('location'), '/api/v1/openid/sign-out?provider=unreachable')
  const done = await browser.follow(`${stack.gw}${res.headers.get('location')}`)
  t.match(await done.response.text(), 'The identity provider could not be told')
})

t.test('provider up: the signed-out page says nothing of the kind, and logout still goes to the end-session', async (t) => {
  const { stack } = await stackWithLog(t)
  const browser = await stack.signedIn('alice')
  const res = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
  const { value } = (await res.json()) as { value: string }
  t.match(value, `${stack.provider?.issuer}/session/end?`)
  const page = await browser.fetch(`${stack.gw}/api/v1/openid/sign-out`, { navigate: true })
  t.notMatch(await page.text(), 'could not be told')
})

t.test('provider stopped: a refresh is 502, the session kept, and the log names ECONNREFUSED', async (t) => {
  const { stack, lines } = await stackWithLog(t)
  const browser = await stack.signedIn('alice')
  await stack.provider?.close()
  const res = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
  t.equal(res.status, 502)
  t.match(await res.json(), { code: 'provider_unavailable' })
  t.match(
    lines().filter((l) => l.msg === 'refresh failed'),
    [{ level: 40, call: 'refresh', problem: 'provider_unavailable', url: `${stack.provider?.issuer}/token`, cause: 'ECONNREFUSED' }],
  )
})

t.test('provider not answering: refresh and sign-out time out, and the log says so', async (t) => {
  const timeoutMs = 300
  const { stack, lines } = await stackWithLog(t, { timeoutMs })
  const browser = await stack.signedIn('alice')
  stack.provider?.stopAnswering()

  const refresh = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
  t.equal(refresh.status, 502)
  t.match(
    lines().find((l) => l.msg === 'refresh failed'),
    { call: 'refresh', url: `${stack.provider?.issuer}/token`, cause: 'timeout' },
  )

  const res = await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
  t.equal(res.status, 200)
  t.equal(((await res.json()) as { value: string }).value, `${stack.gw}/api/v1/openid/sign-out?provider=unreachable`)
  t.match(
    lines().find((l) => l.msg === 'refresh token revocation failed'),
    { call: 'revocation', cause: 'timeout' },
  )
  const probe = await eventually('the end-session probe logged', () => lines().find((l) => l.call === 'end_session'))
  t.match(probe, { url: `${stack.provider?.issuer}/session/end`, cause: 'timeout', timeoutMs })
})
