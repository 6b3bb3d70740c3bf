import t from 'tap'
import { openEchoed, rawRequest } from '../fixtures/http.ts'
import { startStack } from '../fixtures/stack.ts'

const JSON_ACCEPT = { accept: 'application/json' }

t.test('identity headers, spoofing, cookies and X-Forwarded-*', async (t) => {
  // app.example.com is a host the gateway serves, so it is the X-Forwarded-Host of its requests.
  const stack = await startStack(t, { config: { redirects: { allowedHosts: ['app.example.com'] } }, upstreams: [{ name: 'app', forwardAccessToken: true }] })
  const browser = stack.browser()
  const signIn = await browser.signIn(`${stack.gw}/api/v1/openid/redirect`, 'alice')
  const accessToken = ((await signIn.json()) as { value: string }).value
  const session = `ogw=${browser.cookie('ogw')?.value}`

  t.test('identity from the verified claims; every client-sent copy is removed first', async (t) => {
    const res = await rawRequest(stack.gw, '/x', {
      headers: {
        ...JSON_ACCEPT,
        cookie: session,
        'X-Forwarded-User': 'mallory',
        X_Forwarded_User: 'mallory',
        'x-forwarded-email': ['mallory@evil.com', 'again@evil.com'],
        'X-FORWARDED-GROUPS': 'admins',
        'X-Forwarded-Preferred-Username': 'root',
        x_forwarded_preferred_username: 'root',
        'X-Auth-Request-User': 'mallory',
        'X-Real-IP': '10.0.0.1',
        Forwarded: 'for=10.0.0.1',
      },
    })
    t.equal(res.status, 200)
    const h = stack.upstream.requests.at(-1)?.headers ?? {}
    t.equal(h['x-forwarded-user'], 'alice')
    t.equal(h['x-forwarded-email'], 'alice@example.com')
    t.equal(h['x-forwarded-groups'], 'admins,staff')
    t.equal(h['x-forwarded-preferred-username'], 'alice')
    for (const name of Object.keys(h)) {
      t.notMatch(name, /_/, `no underscore variant reaches the upstream: ${name}`)
    }
    t.equal(h['x-auth-request-user'], undefined)
    t.equal(h['x-real-ip'], undefined)
    t.equal(h.forwarded, undefined)
    t.equal(h.authorization, `Bearer ${accessToken}`, 'forwardAccessToken')
  })

  t.test("the gateway's cookies are removed from the upstream's Cookie header, others kept", async (t) => {
    await rawRequest(stack.gw, '/x', { headers: { ...JSON_ACCEPT, cookie: `theme=dark; ${session}; lang=fr; ogw_tx_abc=1; ogw_1=x` } })
    t.equal(stack.upstream.requests.at(-1)?.headers.cookie, 'theme=dark; lang=fr')
    await rawRequest(stack.gw, '/x', { headers: { ...JSON_ACCEPT, cookie: session } })
    t.equal(stack.upstream.requests.at(-1)?.headers.cookie, undefined, 'no Cookie header when nothing is left')
  })

  t.test('X-Forwarded-For/-Proto/-Host are replaced when the peer is not trusted', async (t) => {
    await rawRequest(stack.gw, '/x', {
      headers: {
        ...JSON_ACCEPT,
        cookie: session,
        host: 'app.example.com',
        'x-forwarded-for': '1.2.3.4',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'evil.com',
      },
    })
    const h = stack.upstream.requests.at(-1)?.headers ?? {}
    t.equal(h['x-forwarded-for'], '127.0.0.1')
    t.equal(h['x-forwarded-proto'], 'http')
    t.equal(h['x-forwarded-host'], 'app.example.com')
  })
})

t.test('X-Forwarded-* are extended when the peer is a trusted proxy', async (t) => {
  const stack = await startStack(t, {
    config: { server: { trustedProxies: ['127.0.0.0/8'] }, redirects: { allowedHosts: ['app.example.com'] } },
    upstreams: [{ name: 'app', auth: 'none' }],
  })
  await rawRequest(stack.gw, '/x', {
    headers: { 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'app.example.com' },
  })
  const h = stack.upstream.requests.at(-1)?.headers ?? {}
  t.equal(h['x-forwarded-for'], '203.0.113.9, 127.0.0.1')
  t.equal(h['x-forwarded-proto'], 'https')
  t.equal(h['x-forwarded-host'], 'app.example.com')
})

t.test('configurable identity header names', async (t) => {
  const stack = await startStack(t, {
    upstreams: [{ name: 'app', identityHeaders: { user: 'Remote-User', email: 'Remote-Email', groups: 'Remote-Groups', preferredUsername: 'Remote-Name' } }],
  })
  const browser = await stack.signedIn('bob')
  await rawRequest(stack.gw, '/x', { headers: { ...JSON_ACCEPT, cookie: browser.cookieHeader(`${stack.gw}/x`), 'remote-user': 'mallory', remote_user: 'm' } })
  const h = stack.upstream.requests.at(-1)?.headers ?? {}
  t.equal(h['remote-user'], 'bob')
  t.equal(h['remote-groups'], 'staff')
  t.equal(h['x-forwarded-user'], undefined)
})

t.test("a client's Authorization reaches a forwardAccessToken upstream only as the verified identity's own token", async (t) => {
  const stack = await startStack(t, {
    upstreams: [
      { name: 'app', forwardAccessToken: true, publicPaths: ['/public/**'], allowPreflight: true },
      { name: 'optional', match: { pathPrefix: '/optional' }, auth: 'optional', forwardAccessToken: true },
      { name: 'open', match: { pathPrefix: '/open' }, auth: 'none', forwardAccessToken: true },
      { name: 'live', match: { pathPrefix: '/live' }, auth: 'optional', forwardAccessToken: true, websocket: true },
      { name: 'plain', match: { pathPrefix: '/plain' }, auth: 'none' },
    ],
  })
  const provider = stack.provider!
  const forged = `Bearer ${await provider.signJwt({ sub: 'mallory', aud: 'gateway', groups: ['admins'] }, { alg: 'none' })}`
  const received = () => stack.upstream.requests.at(-1)?.headers.authorization

  const anonymous: Array<[string, string, Record<string, string>]> = [
    ['auth: optional', '/optional/x', {}],
    ['auth: none', '/open/x', {}],
    ['a public path', '/public/x', {}],
    ['an allowed preflight', '/x', { 'access-control-request-method': 'POST', origin: 'https://spa.example.com' }],
  ]
  for (const [what, path, extra] of anonymous) {
    for (const value of [forged, 'Basic bWFsbG9yeTpwdw==', 'Bearer opaque-and-unverified']) {
      const method = 'access-control-request-method' in extra ? 'OPTIONS' : 'GET'
      const res = await rawRequest(stack.gw, path, { method, headers: { ...JSON_ACCEPT, ...extra, authorization: value } })
      t.equal(res.status, 200, `${what}: ${value.slice(0, 12)}`)
      t.equal(received(), undefined, `${what}: the client's Authorization is not forwarded`)
    }
  }

  const good = await provider.signJwt({ sub: 'service-a', aud: 'gateway', scope: 'api' })
  await rawRequest(stack.gw, '/optional/x', { headers: { ...JSON_ACCEPT, authorization: `Bearer ${good}` } })
  t.equal(received(), `Bearer ${good}`, 'a verified Bearer token is the identity, and forwarded as itself')

  const browser = await stack.signedIn('alice')
  const session = browser.cookieHeader(`${stack.gw}/x`)
  await rawRequest(stack.gw, '/optional/x', { headers: { ...JSON_ACCEPT, cookie: session, authorization: forged } })
  t.not(received(), forged, "with a session, the session's token replaces the client's")
  t.match(received(), /^Bearer /)

  await rawRequest(stack.gw, '/plain/x', { headers: { authorization: forged } })
  t.equal(received(), forged, "without forwardAccessToken the header is the client's own, passed as is")

  const url = `${stack.gw.replace('http', 'ws')}/live/socket`
  for (const [authorization, expected] of [
    [forged, undefined],
    [`Bearer ${good}`, `Bearer ${good}`],
  ] as const) {
    await openEchoed(url, { authorization })
    t.equal(
      stack.upstream.upgrades.at(-1)?.headers.authorization,
      expected,
      `WebSocket upgrade: ${expected === undefined ? 'forged token dropped' : 'own token kept'}`,
    )
  }
})

t.test('every client-address, request-override and hop-by-hop header is removed, for HTTP and WebSockets', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', auth: 'none', websocket: true }] })
  const forged: Record<string, string> = {
    'X-Rewrite-URL': '/admin',
    'X-Original-URI': '/admin',
    'X-Original-URL': '/admin',
    'X-Original-Host': 'admin.example.com',
    'X-Original-Forwarded-For': '10.0.0.1',
    'X-Override-URL': '/admin',
    'X-Envoy-Original-Path': '/admin',
    'X-Envoy-Internal': 'true',
    'X-HTTP-Method-Override': 'DELETE',
    'X-HTTP-Method': 'DELETE',
    'X-Method-Override': 'DELETE',
    'True-Client-IP': '10.0.0.1',
    'X-Client-IP': '10.0.0.1',
    'Client-IP': '10.0.0.1',
    'CF-Connecting-IP': '10.0.0.1',
    'CF-Connecting-IPv6': '::1',
    'X-Cluster-Client-IP': '10.0.0.1',
    'Fastly-Client-IP': '10.0.0.1',
    'Akamai-Client-IP': '10.0.0.1',
    'Fly-Client-IP': '10.0.0.1',
    'X-Azure-ClientIP': '10.0.0.1',
    'X-Originating-IP': '10.0.0.1',
    'X-Remote-IP': '10.0.0.1',
    'X-Remote-Addr': '10.0.0.1',
    'X-ProxyUser-IP': '10.0.0.1',
    'WL-Proxy-Client-IP': '10.0.0.1',
    'Proxy-Client-IP': '10.0.0.1',
    'X-Forwarded': 'for=10.0.0.1',
    'X-Forwarded-Server': 'evil',
    'X-Forwarded-Prefix': '/admin',
    'X-Host': 'admin.example.com',
    'X-Real-IP': '10.0.0.1',
    'Proxy-Authorization': 'Basic cHJveHk6c2VjcmV0',
  }
  const withUnderscores = Object.fromEntries(Object.entries(forged).map(([k, v]) => [k.replaceAll('-', '_'), v]))
  for (const headers of [forged, withUnderscores]) {
    const res = await rawRequest(stack.gw, '/x', { headers: { ...headers, 'x-kept': '1' } })
    t.equal(res.status, 200)
    const seen = stack.upstream.requests.at(-1)?.headers ?? {}
    const leaked = Object.keys(seen).filter((name) => name.replaceAll('_', '-') in Object.fromEntries(Object.keys(forged).map((k) => [k.toLowerCase(), 1])))
    t.same(leaked, [], 'none reaches the upstream')
    t.equal(seen['x-kept'], '1')
    t.equal(seen['x-forwarded-for'], '127.0.0.1')
  }

  // The WebSocket client forwards only a few client headers; those pass the same policy.
  await openEchoed(`${stack.gw.replace('http', 'ws')}/socket`, forged)
  const upgrade = stack.upstream.upgrades.at(-1)?.headers ?? {}
  t.same(
    Object.keys(forged).filter((name) => upgrade[name.toLowerCase()] !== undefined),
    [],
    'none reaches the upstream on an upgrade',
  )
})

t.test("upstream responses cannot set or clear the gateway's cookies, nor pass hop-by-hop headers", async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', auth: 'none' }] })
  const setCookies = [
    'ogw=attacker-session; Path=/; HttpOnly',
    'ogw=; Max-Age=0; Path=/',
    'ogw_1=chunk',
    'ogw_tx_abc=forged',
    ' ogw =padded',
    '=ogw=nameless',
    'theme=dark; Path=/',
    'OGW=another-name',
    'lang=fr',
  ]
  const query = [
    ...setCookies.map((c) => `h=${encodeURIComponent(`set-cookie:${c}`)}`),
    `h=${encodeURIComponent('keep-alive:timeout=999')}`,
    `h=${encodeURIComponent('x-hop:1')}`,
    `h=${encodeURIComponent('connection:x-hop')}`,
    `h=${encodeURIComponent('proxy-authenticate:Basic')}`,
    `h=${encodeURIComponent('x-app:1')}`,
  ].join('&')
  const res = await rawRequest(stack.gw, `/respond?${query}`)
  t.equal(res.status, 200)
  t.same(res.headers['set-cookie'], ['theme=dark; Path=/', 'OGW=another-name', 'lang=fr'], "only the application's cookies")
  t.equal(res.headers['x-app'], '1')
  t.equal(res.headers['x-hop'], undefined, 'a header the upstream named in Connection')
  t.equal(res.headers['proxy-authenticate'], undefined)
  t.not(res.headers['keep-alive'], 'timeout=999', "the upstream's Keep-Alive is its own connection's")

  const only = await rawRequest(stack.gw, `/respond?h=${encodeURIComponent('set-cookie:ogw=x')}`)
  t.equal(only.headers['set-cookie'], undefined, 'no Set-Cookie left at all')
})
