import t from 'tap'
import { rawRequest } from '../fixtures/http.ts'
import { startStack } from '../fixtures/stack.ts'

// No decision keys on User-Agent: it is client-chosen, so a bot, a script or a browser asking
// the same thing gets the same answer (no "crawler sees the page" bypass, no UA-based 401/302).

const USER_AGENTS: Record<string, string | undefined> = {
  none: undefined,
  empty: '',
  curl: 'curl/8.5.0',
  browser: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36',
  googlebot: 'Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)',
  'gateway health probe': 'kube-probe/1.30',
}

t.test('the same requests get the same statuses whatever the User-Agent', async (t) => {
  const stack = await startStack(t, {
    upstreams: [
      { name: 'app', publicPaths: ['/public/**'] },
      { name: 'admin', match: { pathPrefix: '/admin' }, allow: { emails: ['nobody@example.com'] } },
      { name: 'open', match: { pathPrefix: '/open' }, auth: 'none' },
    ],
  })
  const browser = await stack.signedIn('alice')
  const session = browser.cookieHeader(`${stack.gw}/`)
  const json = { accept: 'application/json' }
  const html = { accept: 'text/html', 'sec-fetch-mode': 'navigate' }
  const requests: Array<[label: string, method: string, target: string, headers: Record<string, string>]> = [
    ['protected, no session, script', 'GET', '/page', json],
    ['protected, no session, navigation', 'GET', '/page', html],
    ['protected, no session, HEAD', 'HEAD', '/page', html],
    ['protected, signed in', 'GET', '/page', { ...json, cookie: session }],
    ['not allowed, signed in', 'GET', '/admin/x', { ...json, cookie: session }],
    ['public path', 'GET', '/public/a.css', json],
    ['auth: none', 'GET', '/open/x', json],
    ['CORS preflight', 'OPTIONS', '/page', { origin: 'https://other.example', 'access-control-request-method': 'GET' }],
    ['sign-in redirect', 'GET', '/api/v1/openid/redirect', {}],
    ['sign-in URL as JSON', 'GET', '/api/v1/openid/redirect?performRedirect=0', {}],
    ['callback without code', 'GET', '/api/v1/openid/callback', {}],
    ['refresh without session', 'GET', '/api/v1/openid/refresh', {}],
    ['logout without session', 'DELETE', '/api/v1/openid/logout', {}],
  ]

  const byAgent: Record<string, number[]> = {}
  for (const [agent, value] of Object.entries(USER_AGENTS)) {
    const statuses: number[] = []
    for (const [, method, target, headers] of requests) {
      const res = await rawRequest(stack.gw, target, { method, headers: value === undefined ? headers : { ...headers, 'user-agent': value } })
      statuses.push(res.status)
    }
    byAgent[agent] = statuses
  }
  const expected = [401, 302, 302, 200, 403, 200, 200, 401, 302, 200, 400, 400, 401]
  for (const [agent, statuses] of Object.entries(byAgent)) {
    t.strictSame(
      Object.fromEntries(requests.map(([label], i) => [label, statuses[i]])),
      Object.fromEntries(requests.map(([label], i) => [label, expected[i]])),
      agent,
    )
  }
})
