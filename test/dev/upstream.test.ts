import t from 'tap'
import WebSocket from 'ws'
import { startDemoUpstream } from '#src/dev/upstream'
import { startStack } from '../fixtures/stack.ts'
import { startEchoUpstream } from '../fixtures/upstream.ts'

t.test('demo upstream: JSON echo for Accept: application/json and /echo', async (t) => {
  const upstream = await startDemoUpstream()
  t.teardown(() => upstream.close())
  t.match(upstream.url, /^http:\/\/127\.0\.0\.1:\d+$/)

  const res = await fetch(`${upstream.url}/some/path?q=1`, {
    headers: { accept: 'application/json', 'x-forwarded-user': 'alice' },
  })
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^application\/json/)
  const body = (await res.json()) as { method: string; url: string; headers: Record<string, string> }
  t.equal(body.method, 'GET')
  t.equal(body.url, '/some/path?q=1')
  t.equal(body.headers['x-forwarded-user'], 'alice')

  const echo = await fetch(`${upstream.url}/echo`, { method: 'POST', headers: { accept: 'text/html' } })
  t.match(echo.headers.get('content-type'), /^application\/json/, '/echo is JSON whatever the Accept')
  t.equal(((await echo.json()) as { method: string }).method, 'POST')
})

t.test('demo upstream: HTML page shows identity headers, escaped, never token values', async (t) => {
  const upstream = await startDemoUpstream()
  t.teardown(() => upstream.close())
  const evil = '<script>alert(1)</script>"\'&'
  const res = await fetch(`${upstream.url}/app`, {
    headers: {
      accept: 'text/html',
      'x-forwarded-user': evil,
      'x-forwarded-email': 'alice@example.com',
      'x-forwarded-groups': 'admins,staff',
      'x-forwarded-preferred-username': 'alice',
      'x-forwarded-for': '10.0.0.1',
      'x-forwarded-proto': 'https',
      'x-forwarded-host': 'app.example.com',
      authorization: 'Bearer secret-access-token',
      cookie: 'app_pref=dark-and-secret; other=secret-value',
    },
  })
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^text\/html/)
  t.match(res.headers.get('content-security-policy'), /script-src 'sha256-/)
  const html = await res.text()
  t.match(html, /<title>openid-gateway demo upstream<\/title>/)
  t.notMatch(html, '<script>alert(1)</script>', 'header value not injected as markup')
  t.match(html, '&#60;script&#62;alert(1)&#60;/script&#62;&#34;&#39;&#38;', 'header value escaped')
  for (const value of ['alice@example.com', 'admins,staff', '10.0.0.1', 'https', 'app.example.com']) {
    t.match(html, value, `shows ${value}`)
  }
  t.match(html, 'present (value hidden)')
  t.notMatch(html, 'secret-access-token', 'authorization value never shown')
  t.match(html, '<tr><th>app_pref</th>', 'cookie names shown')
  t.match(html, '<tr><th>other</th>')
  t.notMatch(html, 'secret-value', 'cookie values never shown')
  t.notMatch(html, 'dark-and-secret')
  t.match(html, 'id="refresh"')
  t.match(html, 'id="logout"')
  t.match(html, "fetch('/api/v1/openid/refresh'")
  t.match(html, "method: 'DELETE'")

  const bare = await (await fetch(`${upstream.url}/`, { headers: { accept: 'text/html' } })).text()
  t.match(bare, 'No identity headers arrived.')
  t.match(bare, 'not received')
})

t.test("demo upstream: each cookie received is labelled the provider's, the gateway's or neither", async (t) => {
  const upstream = await startDemoUpstream()
  t.teardown(() => upstream.close())
  const cookie = '_session=p1; _session.sig=p2; app_pref=dark; ogw=leaked; <b>x=1'
  const page = async (path: string): Promise<string> => (await fetch(`${upstream.url}${path}`, { headers: { accept: 'text/html', cookie } })).text()
  const owner = (html: string, name: string): string | undefined => new RegExp(`<tr><th>${name}</th><td class="owner">([^<]*)</td></tr>`).exec(html)?.[1]

  const unlabelled = await page('/')
  t.equal(owner(unlabelled, '_session'), 'not known to this page', 'before the demo says whose they are')
  t.match(unlabelled, "The gateway's own cookies never arrive here: it removes them from every request it forwards.")

  upstream.labelCookies({
    provider: { url: 'http://127.0.0.1:4000', owns: (name) => name === '_session' || name === '_session.sig' },
    gateway: { name: 'ogw', owns: (name) => name === 'ogw' },
  })
  for (const path of ['/', '/public/']) {
    const html = await page(path)
    t.equal(owner(html, '_session'), 'the OpenID provider&#39;s (http://127.0.0.1:4000), not the gateway&#39;s', `${path}: the provider's session cookie`)
    t.equal(owner(html, '_session.sig'), 'the OpenID provider&#39;s (http://127.0.0.1:4000), not the gateway&#39;s', `${path}: its signature`)
    t.equal(
      owner(html, 'app_pref'),
      'neither the gateway&#39;s nor the provider&#39;s: this application&#39;s, or another one&#39;s on this host',
      `${path}: the application's`,
    )
    t.equal(owner(html, 'ogw'), 'the gateway&#39;s (it should have removed it: report this)', `${path}: a gateway cookie that got through is called out`)
    t.match(html, '<tr><th>&#60;b&#62;x</th>', `${path}: a cookie name is escaped`)
    t.match(
      html,
      "The gateway's own cookies (named after <code>ogw</code>, its <code>cookies.name</code>) never arrive here",
      `${path}: the gateway's cookies are named`,
    )
    t.match(
      html,
      'the cookies of the development OpenID provider, on the same host (http://127.0.0.1:4000), reach the gateway and this application too',
      `${path}: why the provider's arrive`,
    )
    for (const value of ['p1', 'p2', 'dark', 'leaked']) t.notMatch(html, `>${value}<`, `${path}: no cookie value shown (${value})`)
  }
  const none = await (await fetch(`${upstream.url}/`, { headers: { accept: 'text/html' } })).text()
  t.match(none, 'No cookies received.')
})

t.test('demo upstream: public page', async (t) => {
  const upstream = await startDemoUpstream()
  t.teardown(() => upstream.close())
  const html = await (await fetch(`${upstream.url}/public/anything`, { headers: { accept: 'text/html' } })).text()
  t.match(html, /public page, no sign-in needed/i)
  t.notMatch(html, 'id="logout"', 'no script on the public page')
  // It once said identity headers appear when signed in; public paths never send them.
  t.match(html, /no identity headers reach it, even when you are signed in/)
  t.notMatch(html, /Identity headers appear/i, 'no promise of identity headers')
})

t.test('what the public page says is what the gateway does: a signed-in request to a public path carries no identity', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', publicPaths: ['/public/**'] }] })
  const browser = await stack.signedIn('alice')
  const signedIn = (await (await browser.fetch(`${stack.gw}/page`, { headers: { accept: 'application/json' } })).json()) as { headers: Record<string, string> }
  t.equal(signedIn.headers['x-forwarded-user'], 'alice', 'a protected path is sent who is signed in')
  const res = await browser.fetch(`${stack.gw}/public/anything`, { headers: { accept: 'application/json', 'x-forwarded-user': 'mallory' } })
  const body = (await res.json()) as { headers: Record<string, string> }
  t.equal(body.headers['x-forwarded-user'], undefined, "the public path is sent no identity, not even a client's own")
  t.equal(body.headers['x-forwarded-email'], undefined)
})

t.test('echo upstream records requests and bodies', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())

  const res = await fetch(`${upstream.url}/a/b?c=d`, {
    method: 'POST',
    headers: { 'x-test': '1', 'content-type': 'text/plain' },
    body: 'hello',
  })
  t.equal(res.status, 200)
  const echoed = (await res.json()) as { method: string; url: string; headers: Record<string, string>; body: string }
  t.same({ method: echoed.method, url: echoed.url, body: echoed.body }, { method: 'POST', url: '/a/b?c=d', body: 'hello' })
  t.equal(echoed.headers['x-test'], '1')
  t.equal(upstream.requests.length, 1)
  t.equal(upstream.requests[0]?.headers['x-test'], '1')
  t.equal(upstream.requests[0]?.body, 'hello')

  const teapot = await fetch(`${upstream.url}/status/418`)
  t.equal(teapot.status, 418)
  t.equal(((await teapot.json()) as { url: string }).url, '/status/418')
  const empty = await fetch(`${upstream.url}/status/204`)
  t.equal(empty.status, 204)
  t.equal(await empty.text(), '')

  const started = Date.now()
  const slow = await fetch(`${upstream.url}/slow?ms=150`)
  t.equal(slow.status, 200)
  t.ok(Date.now() - started >= 140, '/slow waits')

  // A client giving up on /slow must not leave the upstream stuck.
  await t.rejects(fetch(`${upstream.url}/slow?ms=5000`, { signal: AbortSignal.timeout(50) }))
  t.equal(upstream.requests.length, 5)
})

t.test('echo upstream: websocket echo records the upgrade headers', async (t) => {
  const upstream = await startEchoUpstream()
  t.teardown(() => upstream.close())

  const ws = new WebSocket(`ws://127.0.0.1:${upstream.port}/socket?x=1`, ['chat', 'other'], {
    headers: { cookie: 'a=b', 'x-forwarded-user': 'alice' },
  })
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('error', reject)
  })
  t.equal(ws.protocol, 'chat', 'first subprotocol accepted')
  const reply = new Promise<string>((resolve) => ws.once('message', (data: Buffer) => resolve(data.toString())))
  ws.send('ping 1')
  t.equal(await reply, 'ping 1')

  const binary = new Promise<{ data: Buffer; isBinary: boolean }>((resolve) =>
    ws.once('message', (data: Buffer, isBinary: boolean) => resolve({ data, isBinary })),
  )
  ws.send(Buffer.from([1, 2, 3]))
  const got = await binary
  t.ok(got.isBinary, 'binary stays binary')
  t.same([...got.data], [1, 2, 3])

  t.equal(upstream.upgrades.length, 1)
  t.equal(upstream.upgrades[0]?.url, '/socket?x=1')
  t.equal(upstream.upgrades[0]?.headers.cookie, 'a=b')
  t.equal(upstream.upgrades[0]?.headers['x-forwarded-user'], 'alice')
  t.equal(upstream.requests.length, 0, 'upgrades are not counted as HTTP requests')

  // close() must not hang on an open socket.
  const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()))
  await upstream.close()
  await closed
  t.pass('closed with a live websocket')
})
