import t from 'tap'
import { redactUrl } from '../../src/ops/logging.js'
import { openEchoed, rawRequest } from '../fixtures/http.js'
import { CLIENT_ID, CLIENT_SECRET, COOKIE_SECRET, startStack } from '../fixtures/stack.js'

t.test('no token, code, cookie or secret in any log line, even at trace level', async (t) => {
  const lines: string[] = []
  const stack = await startStack(t, {
    config: { log: { level: 'trace' } },
    logStream: { write: (line: string) => void lines.push(line) },
    upstreams: [{ name: 'app', forwardAccessToken: true }],
  })
  const browser = stack.browser()
  const signIn = await browser.signIn(`${stack.gw}/api/v1/openid/redirect?redirectAfter=%2Fx`, 'alice')
  t.equal(signIn.status, 302)
  const callbackUrl = new URL(browser.history.find((u) => u.includes('/callback?')) ?? '')
  const refreshed = await browser.fetch(`${stack.gw}/api/v1/openid/refresh`)
  const accessToken = ((await refreshed.json()) as { value: string }).value
  const jwt = await stack.provider!.signJwt({ sub: 'svc', aud: CLIENT_ID, scope: 'api' })
  await rawRequest(stack.gw, '/api', { headers: { accept: 'application/json', authorization: `Bearer ${jwt}` } })
  await browser.fetch(`${stack.gw}/page`, { headers: { accept: 'application/json' } })
  const cookies = browser.cookies().filter((c) => c.name.startsWith('ogw')).map((c) => c.value)
  await browser.fetch(`${stack.gw}/api/v1/openid/logout`, { method: 'DELETE' })
  await rawRequest(stack.gw, `/api/v1/openid/callback?code=leaked-code-value&state=leaked-state-value`)

  t.ok(lines.length > 5, 'logs were captured')
  const all = lines.join('')
  const secrets: Record<string, string> = {
    'authorization code': callbackUrl.searchParams.get('code') ?? 'missing',
    state: callbackUrl.searchParams.get('state') ?? 'missing',
    'a code from a bad callback': 'leaked-code-value',
    'a state from a bad callback': 'leaked-state-value',
    'access token': accessToken,
    'bearer JWT': jwt,
    'client secret': CLIENT_SECRET,
    'cookie secret': COOKIE_SECRET,
  }
  cookies.forEach((value, i) => (secrets[`cookie ${i}`] = value.slice(0, 40)))
  for (const [name, secret] of Object.entries(secrets)) {
    t.ok(secret.length >= 8, `${name} is known to the test`)
    t.notOk(all.includes(secret), `no ${name} in the logs`)
  }

  const requests = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === 'request')
  t.ok(requests.length >= 6, 'one line per request')
  for (const line of requests) {
    t.type(line.reqId, 'string', 'with a request id')
    t.type(line.status, 'number')
  }
  t.ok(requests.some((l) => l.sub === 'alice'), 'signed-in requests name the subject')
  const perRequest = lines
    .map((l) => JSON.parse(l) as { level: number; msg: string; reqId?: string })
    .filter((l) => l.level >= 30 && l.reqId !== undefined)
  t.same(new Set(perRequest.map((l) => l.msg)), new Set(['request']), 'at info level, exactly one line per request')
})

t.test('redactUrl hides the values of secret query parameters only', async (t) => {
  t.equal(redactUrl('/cb?code=abc&state=def&x=1'), '/cb?code=%5Bredacted%5D&state=%5Bredacted%5D&x=1')
  t.equal(redactUrl('/page?q=1'), '/page?q=1')
  t.equal(redactUrl('/p'), '/p')
  t.equal(redactUrl('/p?ID_TOKEN_HINT=x'), '/p?ID_TOKEN_HINT=%5Bredacted%5D')
  t.equal(redactUrl('/cb?x=1&%63ode=abc'), '/cb?x=1&code=%5Bredacted%5D', 'a percent-encoded name is the same parameter')
  t.equal(redactUrl('/cb?a=1&state'), '/cb?a=1&state=%5Bredacted%5D', 'a name without a value')
  t.equal(redactUrl('/p?barcode=1&statement=2'), '/p?barcode=1&statement=2', 'names that only contain a secret name')
})

t.test('the proxy libraries log no secret either: WebSocket URLs, upstream errors, at trace level', async (t) => {
  const lines: string[] = []
  const stack = await startStack(t, {
    config: { log: { level: 'trace' } },
    logStream: { write: (line: string) => void lines.push(line) },
    upstreams: [
      { name: 'app', forwardAccessToken: true, websocket: true },
      // Nothing listens there: reply-from logs the failure.
      { name: 'down', match: { pathPrefix: '/down' }, target: 'http://127.0.0.1:9', auth: 'none' },
    ],
  })
  const browser = await stack.signedIn('alice')
  const cookie = browser.cookieHeader(`${stack.gw}/x`)
  const secrets = {
    query: 'query-access-token-0123456789',
    token: 'query-token-0123456789',
    bearer: await stack.provider!.signJwt({ sub: 'svc', aud: CLIENT_ID }),
    proxy: 'cHJveHk6cHJveHktc2VjcmV0',
  }

  await openEchoed(`${stack.gw.replace('http', 'ws')}/socket?access_token=${secrets.query}&token=${secrets.token}`, {
    cookie,
    authorization: `Bearer ${secrets.bearer}`,
  })
  await rawRequest(stack.gw, `/down/x?access_token=${secrets.query}`, {
    headers: { authorization: `Bearer ${secrets.bearer}`, 'proxy-authorization': `Basic ${secrets.proxy}`, cookie },
  })
  await rawRequest(stack.gw, `/x?token=${secrets.token}`, { headers: { accept: 'application/json', 'proxy-authorization': `Basic ${secrets.proxy}`, cookie } })

  const all = lines.join('')
  t.ok(lines.some((l) => l.includes('proxy websocket')), "the WebSocket proxy's debug line is there")
  t.ok(lines.some((l) => l.includes('response errored')), "reply-from's failure line is there")
  for (const [name, secret] of Object.entries(secrets)) t.notOk(all.includes(secret), `no ${name} in the logs`)
  t.notOk(all.includes(cookie.slice(4, 44)), 'no session cookie in the logs')
})
