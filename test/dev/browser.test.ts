import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { Browser, parseForms, parseSetCookie } from '../fixtures/browser.ts'

interface Seen {
  method: string
  url: string
  headers: IncomingHttpHeaders
  body: string
}

// Routes: /set?h=<Set-Cookie>[&h=…] sets cookies; /redirect?status=N&to=URL redirects;
// anything else echoes what it saw as JSON.
async function startSite(t: { teardown(fn: () => unknown): void }): Promise<{ origin: string; seen: Seen[] }> {
  const seen: Seen[] = []
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (chunk: Buffer) => (body += chunk.toString()))
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x')
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body })
      if (url.pathname === '/set') {
        res.setHeader('set-cookie', url.searchParams.getAll('h'))
        res.end('set')
      } else if (url.pathname === '/redirect') {
        res.writeHead(Number(url.searchParams.get('status')), { location: url.searchParams.get('to') ?? '/' }).end()
      } else {
        res.setHeader('content-type', 'application/json')
        res.end(JSON.stringify({ method: req.method, url: req.url, cookie: req.headers.cookie ?? null, body }))
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen }
}

function setUrl(origin: string, ...headers: string[]): string {
  const url = new URL('/set', origin)
  for (const h of headers) url.searchParams.append('h', h)
  return url.href
}

t.test('parseSetCookie', async (t) => {
  const now = 1_000_000_000_000
  const c = parseSetCookie('sid=abc=def; Path=/api; HttpOnly; SameSite=Lax; Secure; Max-Age=600; Domain=.Example.com', 'http://127.0.0.1/x/y', now)
  t.same(c, {
    name: 'sid',
    value: 'abc=def',
    path: '/api',
    domain: 'example.com',
    httpOnly: true,
    sameSite: 'Lax',
    secure: true,
    maxAge: 600,
    expiresAt: now + 600_000,
    expires: undefined,
    deletes: false,
  })
  t.equal(parseSetCookie('a=b', 'http://127.0.0.1/x/y/z')?.path, '/x/y', 'default path per RFC 6265 5.1.4')
  t.equal(parseSetCookie('a=b', 'http://127.0.0.1/x')?.path, '/')
  t.equal(parseSetCookie('a=b; Path=relative', 'http://127.0.0.1/x/y')?.path, '/x', 'a path not starting with / is ignored')
  t.ok(parseSetCookie('a=; Max-Age=0', 'http://127.0.0.1/', now)?.deletes)
  t.ok(parseSetCookie('a=; Expires=Thu, 01 Jan 1970 00:00:00 GMT', 'http://127.0.0.1/', now)?.deletes)
  t.notOk(parseSetCookie('a=b; Max-Age=60; Expires=Thu, 01 Jan 1970 00:00:00 GMT', 'http://127.0.0.1/', now)?.deletes, 'Max-Age wins')
  t.equal(parseSetCookie('novalue', 'http://127.0.0.1/'), undefined)
  t.equal(parseSetCookie('=x', 'http://127.0.0.1/'), undefined)
})

t.test('cookie jar: store, path match, delete, prefixes', async (t) => {
  const site = await startSite(t)
  const b = new Browser()
  await b.fetch(
    setUrl(
      site.origin,
      'root=1; Path=/',
      'api=2; Path=/api',
      'deep=3; Path=/api/v1/openid; HttpOnly; SameSite=Strict',
      '__Host-ok=4; Path=/; Secure',
      '__Host-bad=5; Path=/api; Secure',
      '__Secure-bad=6',
    ),
  )
  t.same(
    b
      .cookies()
      .map((c) => c.name)
      .sort(),
    ['__Host-ok', 'api', 'deep', 'root'],
    'prefix rules enforced',
  )
  t.same(b.cookie('deep'), {
    name: 'deep',
    value: '3',
    path: '/api/v1/openid',
    domain: undefined,
    httpOnly: true,
    sameSite: 'Strict',
    secure: false,
    maxAge: undefined,
    expiresAt: undefined,
  })

  t.equal(b.cookieHeader(`${site.origin}/`), 'root=1; __Host-ok=4')
  t.equal(b.cookieHeader(`${site.origin}/apix`), 'root=1; __Host-ok=4', '/api does not match /apix')
  t.equal(b.cookieHeader(`${site.origin}/api/v1/openid/callback`), 'deep=3; api=2; root=1; __Host-ok=4', 'longest path first')

  const echoed = (await (await b.fetch(`${site.origin}/api/x`)).json()) as { cookie: string }
  t.equal(echoed.cookie, 'api=2; root=1; __Host-ok=4', 'sent on requests')

  const other = (await (await b.fetch(`http://localhost:${new URL(site.origin).port}/`, { headers: { cookie: 'mine=1' } })).json()) as { cookie: string }
  t.equal(other.cookie, 'mine=1; root=1; __Host-ok=4', 'explicit Cookie header kept, jar appended (single-host jar)')

  await b.fetch(setUrl(site.origin, 'api=; Path=/api; Max-Age=0', 'root=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT'))
  t.same(
    b
      .cookies()
      .map((c) => c.name)
      .sort(),
    ['__Host-ok', 'deep'],
    'Max-Age=0 and past Expires delete',
  )

  await b.fetch(setUrl(site.origin, 'deep=7; Path=/api/v1/openid; Max-Age=1'))
  t.equal(b.cookie('deep')?.value, '7', 'overwritten')
  t.equal(b.cookie('deep')?.maxAge, 1)
  b.setCookie('deep', '8', { path: '/api/v1/openid', expiresAt: Date.now() - 1 })
  t.equal(b.cookie('deep'), undefined, 'expired cookies are dropped')

  b.clearCookies()
  t.same(b.cookies(), [])
})

t.test('fetch vs navigation headers, history', async (t) => {
  const site = await startSite(t)
  const b = new Browser()
  await b.fetch(`${site.origin}/api`)
  await b.fetch(`${site.origin}/page`, { navigate: true })
  await b.fetch(`${site.origin}/custom`, { navigate: true, headers: { accept: 'application/json' } })
  t.equal(site.seen[0]?.headers['sec-fetch-mode'], 'cors')
  t.equal(site.seen[0]?.headers.accept, '*/*')
  t.equal(site.seen[1]?.headers['sec-fetch-mode'], 'navigate')
  t.match(site.seen[1]?.headers.accept, /^text\/html/)
  t.equal(site.seen[2]?.headers.accept, 'application/json', 'explicit headers win')
  t.same(b.history, [`${site.origin}/api`, `${site.origin}/page`, `${site.origin}/custom`])

  const res = await b.fetch(`${site.origin}/redirect?status=302&to=/elsewhere`)
  t.equal(res.status, 302, 'fetch does not follow')
  t.equal(res.headers.get('location'), '/elsewhere')
  t.equal(res.url, `${site.origin}/redirect?status=302&to=/elsewhere`)
})

t.test('follow: method rewriting per status', async (t) => {
  const site = await startSite(t)
  const b = new Browser()
  for (const [status, method, body] of [
    [302, 'GET', ''],
    [303, 'GET', ''],
    [307, 'POST', 'a=1'],
    [308, 'POST', 'a=1'],
  ] as const) {
    const { response, visited } = await b.follow(`${site.origin}/redirect?status=${status}&to=/end`, {
      method: 'POST',
      body: new URLSearchParams({ a: '1' }),
    })
    const echoed = (await response.json()) as { method: string; body: string }
    t.same({ method: echoed.method, body: echoed.body }, { method, body }, `${status}`)
    t.same(visited, [`${site.origin}/redirect?status=${status}&to=/end`, `${site.origin}/end`])
  }
  await t.rejects(b.follow(`${site.origin}/redirect?status=302&to=/redirect%3Fstatus%3D302%26to%3D%2Fx`, {}, 0), /more than 0 redirects/)
})

t.test('parseForms', async (t) => {
  const html = `
    <form autocomplete="off" action="/interaction/abc?x=1&amp;y=2" method="post">
      <input type="hidden" name="prompt" value="login"/>
      <input required type="text" name="login" placeholder="Enter any login">
      <input type="checkbox" name="remember" value="yes">
      <input type="checkbox" name="checked" value="on" checked>
      <button type="submit">Sign-in</button>
    </form>
    <form method="post" action="https://op.example/session/end/confirm" id="op.logoutForm">
      <input type="hidden" name="xsrf" value="t&#x2F;k"/>
    </form>
    <button autofocus type="submit" form="op.logoutForm" value="yes" name="logout">Yes</button>
    <button type="submit" form="op.logoutForm">No</button>`
  const forms = parseForms(html, 'http://127.0.0.1:4000/interaction/abc')
  t.equal(forms.length, 2)
  t.same(forms[0], {
    action: 'http://127.0.0.1:4000/interaction/abc?x=1&y=2',
    method: 'POST',
    fields: { prompt: 'login', login: '', checked: 'on' },
    buttons: [],
  })
  t.same(forms[1], {
    action: 'https://op.example/session/end/confirm',
    method: 'POST',
    fields: { xsrf: 't/k' },
    buttons: [{ name: 'logout', value: 'yes' }],
  })
})

t.test('signIn returns the gateway response when the gateway never leaves its origin', async (t) => {
  const site = await startSite(t)
  const b = new Browser()
  const res = await b.signIn(`${site.origin}/redirect?status=302&to=/landing`, 'alice')
  t.equal(res.status, 200)
  t.equal(((await res.json()) as { url: string }).url, '/landing')
})
