import t from 'tap'
import pino from 'pino'
import type { FastifyBaseLogger } from 'fastify'
import { createUrlRedactor, lazyRequestLogger, redactUrl, urlRedactor } from '#src/ops/logging'
import { openEchoed, rawRequest } from '../fixtures/http.ts'
import { eventually } from '../fixtures/poll.ts'
import { AUDIT_MESSAGE } from '#src/ops/audit'
import { CLIENT_ID, CLIENT_SECRET, COOKIE_SECRET, startStack } from '../fixtures/stack.ts'

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
  const cookies = browser
    .cookies()
    .filter((c) => c.name.startsWith('ogw'))
    .map((c) => c.value)
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
  t.ok(
    requests.some((l) => l.sub === 'alice'),
    'signed-in requests name the subject',
  )
  const perRequest = lines.map((l) => JSON.parse(l) as { level: number; msg: string; reqId?: string }).filter((l) => l.level >= 30 && l.reqId !== undefined)
  // Besides its request line, a sign-in, refresh or logout writes its audit line (ops/audit.ts).
  t.same(
    new Set(perRequest.map((l) => l.msg).filter((msg) => msg !== AUDIT_MESSAGE)),
    new Set(['request']),
    'at info level, exactly one line per request, besides the audit trail',
  )
})

t.test('redactUrl hides the values of credential-like query parameters only', async (t) => {
  t.equal(redactUrl('/cb?code=abc&state=def&x=1'), '/cb?code=[redacted]&state=[redacted]&x=1')
  t.equal(redactUrl('/page?q=1'), '/page?q=1')
  t.equal(redactUrl('/p'), '/p')
  t.equal(redactUrl('/p?ID_TOKEN_HINT=x'), '/p?ID_TOKEN_HINT=[redacted]')
  t.equal(redactUrl('/cb?x=1&%63ode=abc'), '/cb?x=1&%63ode=[redacted]', 'a percent-encoded name is the same parameter; it stays as sent')
  t.equal(redactUrl('/cb?a=1&state'), '/cb?a=1&state=[redacted]', 'a name without a value')
  t.equal(redactUrl('/p?q=a%20b&password=x&page=2'), '/p?q=a%20b&password=[redacted]&page=2', 'the other parameters stay byte for byte')
  t.equal(redactUrl('/p?q=token'), '/p?q=token', 'a value that looks like a name is not a name')
})

t.test('every name that contains a credential word is redacted, case-insensitive, inside larger names', async (t) => {
  const secret = [
    'password',
    'user_password',
    'PASSWORD',
    'passwd',
    'db_passwd',
    'secret',
    'client_secret',
    'ClientSecret',
    'token',
    'accessToken',
    'reset-token',
    'api_key',
    'X-Api-Key',
    'x_api_key',
    'apikey',
    'ApiKey',
    'key',
    'jwt',
    'id_jwt',
    'session',
    'sessionId',
    'auth',
    'Authorization',
    'oauth_verifier',
    'code',
    'barcode',
    'state',
    'statement',
    'nonce',
    'pass%77ord',
  ]
  for (const name of secret) {
    t.equal(redactUrl(`/p?${name}=VALUE&page=2`), `/p?${name}=[redacted]&page=2`, name)
  }
  const plain = ['page', 'q', 'sort', 'user', 'email', 'id', 'lang', 'pass', 'word', 'ke', 'stat', 'cod', 'to-ken']
  for (const name of plain) t.equal(redactUrl(`/p?${name}=VALUE`), `/p?${name}=VALUE`, name)
})

t.test('log.redactQueryParams replaces the default list; the sign-in parameters stay redacted', async (t) => {
  const redact = createUrlRedactor(['ssn'])
  t.equal(redact('/p?user_ssn=1&password=2&postcode=3'), '/p?user_ssn=[redacted]&password=2&postcode=3')
  t.equal(
    redact('/cb?code=1&state=2&id_token_hint=3'),
    '/cb?code=[redacted]&state=[redacted]&id_token_hint=[redacted]',
    "the gateway's own parameters, whatever the list",
  )
  t.equal(createUrlRedactor([])('/p?api_key=1&token=2'), '/p?api_key=1&token=[redacted]', 'an empty list keeps only them')
  t.equal(urlRedactor({})('/p?api_key=1'), '/p?api_key=[redacted]', 'unset is the default list')
})

t.test('a proxied request with credentials in its query string logs none of their values', async (t) => {
  const lines: string[] = []
  const stack = await startStack(t, {
    config: { log: { level: 'info' } },
    logStream: { write: (line: string) => void lines.push(line) },
    upstreams: [{ name: 'app', auth: 'none' }],
  })
  const response = await rawRequest(stack.gw, '/search?password=hunter2-secret&api_key=k-0123456789&page=2')
  t.equal(response.status, 200, 'proxied')
  const line = await eventually('the request line', () =>
    lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'request' && String(l.url).startsWith('/search')),
  )
  const all = lines.join('')
  t.notOk(all.includes('hunter2-secret'), 'no password value')
  t.notOk(all.includes('k-0123456789'), 'no API key value')
  t.equal(line.url, '/search?password=[redacted]&api_key=[redacted]&page=2', 'the names and the other parameters stay')
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
  t.ok(
    lines.some((l) => l.includes('proxy websocket')),
    "the WebSocket proxy's debug line is there",
  )
  t.ok(
    lines.some((l) => l.includes('response errored')),
    "reply-from's failure line is there",
  )
  for (const [name, secret] of Object.entries(secrets)) t.notOk(all.includes(secret), `no ${name} in the logs`)
  t.notOk(all.includes(cookie.slice(4, 44)), 'no session cookie in the logs')
})

t.test("a request's logger is made when the request first logs, and logs as a pino child would", async (t) => {
  const lines: Array<Record<string, unknown>> = []
  const base = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) })
  let children = 0
  // The app's logger, counting the children made of it.
  const parent = {
    level: base.level,
    child: (bindings: Record<string, unknown>, options?: Record<string, unknown>) => {
      children++
      return base.child(bindings, options)
    },
  } as unknown as FastifyBaseLogger
  const log = lazyRequestLogger(parent, { reqId: 'r-1' }, {})
  t.equal(log.level, 'info', "its level is the parent's")
  log.debug('below the level')
  t.equal(children, 1, 'a call made the child')
  t.same(lines, [], 'nothing below the level is written')
  const quiet = lazyRequestLogger(parent, { reqId: 'r-2' }, {})
  t.equal(quiet.level, 'info')
  t.equal(children, 1, 'a logger that never logs costs no child')
  log.warn({ upstream: 'app' }, 'something %s', 'happened')
  log.info('again')
  t.equal(children, 1, 'one child per request')
  t.match(lines, [
    { level: 40, reqId: 'r-1', upstream: 'app', msg: 'something happened' },
    { level: 30, reqId: 'r-1', msg: 'again' },
  ])
  log.child({ extra: 1 }).error('from a child')
  t.match(lines[2], { level: 50, reqId: 'r-1', extra: 1, msg: 'from a child' })
  const debug = lazyRequestLogger(parent, { reqId: 'r-3' }, { level: 'debug' })
  t.equal(debug.level, 'debug', "a route's own log level")
  debug.debug('shown')
  t.match(lines[3], { level: 20, reqId: 'r-3', msg: 'shown' })
})
