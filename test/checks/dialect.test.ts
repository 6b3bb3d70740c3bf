// A check dialect added the way src/checks/dialect.ts says: one file (here, the TOY below) and one
// line (its place in the list buildApp is given, `[...CHECK_DIALECTS, toy]`). The toy describes
// the request checked with two headers of its own (Toy-Method, Toy-Url) and answers with an Exit
// of its own (Envoy's shape: the upstream's header names, and the names to remove in a header of
// its own), and gets the whole behaviour from the Checker with nothing else registered anywhere:
// the contract's 401 and signInUrl for a program, the 302 to sign in for a page load where its
// exit redirects (401 where it does not), the allow rules' 403, the identity headers, the access
// token and an RFC 8693 exchange, the identity assertion and a Transaction Token, each verified as
// the application would, and its route routed on the raw target (a `..` after it is 400, never
// the endpoint it would normalize to).
//
// The sessions are signed in at the stack's gateway; the toy is served by a second app built from
// the same configuration (cookie sessions: any replica reads them), as another replica would.

import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, writeFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as jose from 'jose'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import type { Exit } from '#src/access/answer'
import { checkContext, checkedTarget, type CheckedRequest } from '#src/access/checker'
import { canonicalHost } from '#src/access/match'
import { writeAnswer, type CheckDialect } from '#src/checks/dialect'
import { CHECK_DIALECTS } from '#src/checks/dialects'
import { GatewayError, type Problem } from '#src/contract/errors'
import { buildStandaloneApp } from '#src/runtime/process-state'
import { clientAddress } from '#src/upstream/forwarded'
import { rawRequest, type RawResponse } from '../fixtures/http.ts'
import { CLIENT_ID, gatewayCookies, startStack } from '../fixtures/stack.ts'

const APP = 'app.example.com'
const TRUST_DOMAIN = 'trust-domain.example'
const NAVIGATION = { accept: 'text/html,application/xhtml+xml', 'sec-fetch-mode': 'navigate' }
/** The toy's own removal list, as Envoy reads x-envoy-auth-headers-to-remove. */
const TOY_REMOVE = 'toy-remove'

const dir = mkdtempSync(join(tmpdir(), 'ogw-dialect-'))
const keyFile = join(dir, 'assertion.pem')
writeFileSync(keyFile, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }))

function header(headers: Record<string, string | string[] | undefined>, name: string): string {
  const value = headers[name]
  if (typeof value !== 'string') throw new GatewayError('bad_request', `name the request in one ${name}`)
  return value
}

/** The toy dialect at `path`, answering at `exit`: the one file a new dialect is. */
function toyDialect(name: string, path: string, exit: Exit): CheckDialect {
  return {
    name,
    route: () => ({ path, match: 'endpoint' }),
    async register(app: FastifyInstance, { checker, isTrustedProxy }, route) {
      app.get(route.path, async (req, reply) => {
        const url = new URL(header(req.headers, 'toy-url'))
        const checked: CheckedRequest = {
          method: header(req.headers, 'toy-method'),
          host: canonicalHost(url.host),
          scheme: url.protocol.slice(0, -1),
          target: checkedTarget(url.pathname + url.search, 'Toy-Url'),
          clientAddress: () => clientAddress(req.headers, req.socket.remoteAddress, isTrustedProxy),
        }
        const answer = await checker.answer(checkContext(req, checked), reply, checked, exit)
        if (answer.kind === 'pass') reply.header(TOY_REMOVE, answer.headers.remove.join(','))
        return writeAnswer(req, reply, answer)
      })
    },
  }
}

const TOY = '/api/v1/openid/toy'
const TOY_PLAIN = '/api/v1/openid/toy-plain'

t.test('a toy dialect added in one file and one line gets the whole behaviour', async (t) => {
  const stack = await startStack(t, {
    provider: { tokenExchange: { audiences: ['orders-api'], expiresInSeconds: 300 } },
    config: { redirects: { allowedHosts: [APP] }, assertions: { signingKeys: [keyFile] } },
    upstreams: [
      {
        name: 'app',
        match: { pathPrefix: '/', hosts: [APP] },
        publicPaths: ['/public/**'],
        forwardAccessToken: true,
        identityAssertion: true,
        transactionTokens: { trustDomain: TRUST_DOMAIN, scope: ['orders.read'] },
      },
      { name: 'admin', match: { pathPrefix: '/admin', hosts: [APP] }, allow: { groups: ['auditors'] } },
      { name: 'orders', match: { pathPrefix: '/orders', hosts: [APP] }, tokenExchange: { audience: 'orders-api', scope: ['orders.read'] } },
    ],
  })
  const app = await buildStandaloneApp(stack.config, {
    logStream: { write: () => undefined },
    checkDialects: [
      ...CHECK_DIALECTS,
      toyDialect('toy', TOY, { redirects: true, carrier: 'edge' }),
      toyDialect('toy-plain', TOY_PLAIN, { redirects: false, carrier: 'edge' }),
    ],
  })
  t.teardown(() => app.close())
  await app.http.listen({ host: '127.0.0.1', port: 0 })
  await app.providersReady
  const toyGw = `http://127.0.0.1:${(app.http.server.address() as AddressInfo).port}`
  const cookie = await gatewayCookies(stack, 'alice')
  const ask = (url: string, headers: Record<string, string> = {}, path = TOY): Promise<RawResponse> =>
    rawRequest(toyGw, path, { headers: { 'toy-method': 'GET', 'toy-url': url, accept: 'application/json', ...headers } })
  const signInUrl = (url: string): string => `${stack.gw}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent(url)}`

  t.test('a program without a session: the 401 of the contract, with WWW-Authenticate and signInUrl', async (t) => {
    for (const path of [TOY, TOY_PLAIN]) {
      const res = await ask('https://app.example.com/page?x=1', {}, path)
      t.equal(res.status, 401, path)
      t.equal(res.headers['www-authenticate'], 'Bearer resource_metadata="http://app.example.com/.well-known/oauth-protected-resource"')
      t.match(res.headers['content-type'], /^application\/problem\+json/)
      const body = res.json<Problem>()
      t.equal(body.code, 'unauthenticated')
      t.equal(body.signInUrl, signInUrl('https://app.example.com/page?x=1'), 'back to the URL the toy named')
    }
  })

  t.test('a page load: 302 to sign in where the exit redirects, 401 where it does not', async (t) => {
    const redirected = await ask('https://app.example.com/page?x=1', NAVIGATION)
    t.equal(redirected.status, 302)
    t.equal(redirected.headers.location, signInUrl('https://app.example.com/page?x=1'))
    const plain = await ask('https://app.example.com/page?x=1', NAVIGATION, TOY_PLAIN)
    t.equal(plain.status, 401)
    t.equal(plain.headers.location, undefined)
    t.match(plain.body, /Error 401 · unauthenticated/, "the error page a browser's page load gets")
    const post = await ask('https://app.example.com/page', { ...NAVIGATION, 'toy-method': 'POST' })
    t.equal(post.status, 401, 'a POST is no page load to send to sign in')
  })

  t.test('the allow rules: 403 forbidden', async (t) => {
    const res = await ask('https://app.example.com/admin/users', { cookie })
    t.equal(res.status, 403)
    t.equal(res.json<Problem>().code, 'forbidden')
    t.equal(res.headers['x-forwarded-user'], undefined, 'no identity with a refusal')
  })

  t.test('a public path: 200 without identity, the identity names to remove', async (t) => {
    const res = await ask('https://app.example.com/public/logo.png', { 'x-forwarded-user': 'mallory' })
    t.equal(res.status, 200)
    t.equal(res.headers['x-forwarded-user'], undefined)
    const remove = String(res.headers[TOY_REMOVE]).split(',')
    t.ok(remove.includes('x-forwarded-user'), 'the forged identity header is named for removal')
    t.ok(remove.includes('x-identity-assertion') && remove.includes('txn-token'), 'the assertion and Txn-Token too')
  })

  t.test('signed in: the identity headers, the access token, the assertion and a Txn-Token', async (t) => {
    const res = await ask('https://app.example.com/shop/list?x=1', { cookie, 'x-forwarded-for': '203.0.113.9' })
    t.equal(res.status, 200)
    t.equal(res.headers['x-forwarded-user'], 'alice')
    t.equal(res.headers['x-forwarded-email'], 'alice@example.com')
    t.equal(res.headers['x-forwarded-groups'], 'admins,staff')

    // forwardAccessToken: alice's access token, which her provider's userinfo accepts.
    const authorization = res.headers.authorization
    t.match(authorization, /^Bearer \S+$/)
    const discovery = (await (await fetch(`${stack.provider?.issuer}/.well-known/openid-configuration`)).json()) as { userinfo_endpoint: string }
    const userinfo = await fetch(discovery.userinfo_endpoint, { headers: { authorization: String(authorization) } })
    t.equal(userinfo.status, 200)
    t.equal(((await userinfo.json()) as { sub: string }).sub, 'alice', "the session's own access token")

    const jwks = jose.createRemoteJWKSet(new URL(`${stack.gw}/.well-known/jwks.json`))
    const assertion = res.headers['x-identity-assertion']
    if (typeof assertion !== 'string') throw new Error('no identity assertion')
    const { payload } = await jose.jwtVerify(assertion, jwks, { issuer: stack.gw, audience: 'app' })
    t.equal(payload.sub, 'alice')
    t.strictSame(payload.groups, ['admins', 'staff'])

    const txn = res.headers['txn-token']
    if (typeof txn !== 'string') throw new Error('no Txn-Token')
    const minted = await jose.jwtVerify(txn, jwks, { typ: 'txntoken+jwt', audience: TRUST_DOMAIN, algorithms: ['ES256'] })
    t.equal(minted.payload.sub, 'alice')
    t.strictSame(minted.payload.tctx, { upstream: 'app', method: 'GET', path: '/shop/list', idp: stack.provider?.issuer }, 'the request the toy named')
    t.strictSame(minted.payload.rctx, { transport: 'https', req_ip: '127.0.0.1' }, 'the caller, not in server.trustedProxies: its X-Forwarded-For is ignored')

    const remove = String(res.headers[TOY_REMOVE]).split(',')
    t.notOk(remove.includes('authorization') || remove.includes('x-forwarded-user'), 'nothing set is removed')
    t.ok(remove.includes('x-original-url'), 'the request-target overrides are removed')
    t.ok(remove.includes('cookie'), "the gateway's cookies, all the cookies sent, are removed")
  })

  t.test('tokenExchange: the upstream’s own token, never the user’s', async (t) => {
    const res = await ask('https://app.example.com/orders/list', { cookie })
    t.equal(res.status, 200)
    const authorization = String(res.headers.authorization)
    t.match(authorization, /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/)
    const claims = jose.decodeJwt(authorization.slice('Bearer '.length))
    t.equal(claims.aud, 'orders-api')
    t.equal(claims.sub, 'alice')
    t.equal(claims.client_id, CLIENT_ID)
    t.equal(res.headers['x-identity-assertion'], undefined, 'an upstream without identityAssertion gets none')
  })

  t.test('a Bearer token counts as signed in, as on every exit', async (t) => {
    const token = await stack.provider!.signJwt({ sub: 'service-a', aud: CLIENT_ID, scope: 'api' })
    const res = await ask('https://app.example.com/page', { authorization: `Bearer ${token}` })
    t.equal(res.status, 200)
    t.equal(res.headers['x-forwarded-user'], 'service-a')
  })

  t.test("the toy's route is a check route: a `..` after it is 400, never the endpoint it normalizes to", async (t) => {
    const escape = `${TOY}/../redirect?performRedirect=false`
    const landed = await rawRequest(stack.gw, escape, { headers: { host: APP } })
    t.equal(landed.status, 200, 'without the toy registered, the target normalizes to the sign-in endpoint, whose 200 is an allow')
    for (const target of [escape, `${TOY}//../redirect`, `${TOY}/%2e%2e/redirect`]) {
      const res = await rawRequest(toyGw, target, { headers: { host: APP, 'toy-method': 'GET', 'toy-url': 'https://app.example.com/page' } })
      t.equal(res.status, 400, target)
      t.equal(res.json<Problem>().code, 'bad_request')
    }
    t.equal((await ask('https://app.example.com/page')).status, 401, 'the toy itself is decided')
    const res = await rawRequest(toyGw, `${TOY}?x=1`, { headers: { 'toy-method': 'GET', 'toy-url': 'https://app.example.com/page' } })
    t.equal(res.status, 401, 'with a query too')
  })
})
