import t from 'tap'
import { rawRequest } from '../fixtures/http.js'
import { startStack } from '../fixtures/stack.js'

const JSON_ACCEPT = { accept: 'application/json' }

t.test('identity headers, spoofing, cookies and X-Forwarded-*', async (t) => {
  const stack = await startStack(t, { upstreams: [{ name: 'app', forwardAccessToken: true }] })
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
  const stack = await startStack(t, { config: { server: { trustedProxies: ['127.0.0.0/8'] } }, upstreams: [{ name: 'app', auth: 'none' }] })
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
