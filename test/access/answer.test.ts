import t from 'tap'
import { Answers, type Answer, type AnsweredRequest, type Exit } from '#src/access/answer'
import type { Verdict } from '#src/access/decision'
import { GatewayError } from '#src/contract/errors'
import type { UpstreamConfig } from '#src/options/types'
import { createRedirectAfterValidator } from '#src/routes/redirect-after'
import { UpstreamCredentials } from '#src/upstream/credentials'
import { REQUEST_OVERRIDE_HEADER_NAMES } from '#src/upstream/header-policy'
import type { TokenExchanger } from '#src/upstream/token-exchange'
import { resolve } from '../fixtures/config/base.ts'
import { identityOf } from '../fixtures/decision-inputs.ts'

// The one answer of a verdict (access/answer.ts Answers.answer) for each kind of exit, without
// Fastify: a real normalized configuration, its real credential writers and redirect rule. The
// exits are those of the product: the proxy (redirects, forwards the request itself), Envoy (an
// edge that applies the headers to set and remove), Traefik and ingress-nginx (ingresses that copy
// X-Auth-Request-*; only Traefik hands a 302 to the browser). The token exchanger is a stub (a unit
// test may stub its collaborator): it answers for `orders` and refuses `refused`.

const PUBLIC = 'https://app.example.com'
const PROXY: Exit = { redirects: true, carrier: 'proxy' }
const ENVOY: Exit = { redirects: true, carrier: 'edge' }
const TRAEFIK: Exit = { redirects: true, carrier: 'ingress' }
const NGINX: Exit = { redirects: false, carrier: 'ingress' }
const EXITS: ReadonlyArray<[string, Exit]> = [
  ['proxy', PROXY],
  ['envoy', ENVOY],
  ['traefik', TRAEFIK],
  ['ingress-nginx', NGINX],
]

const config = resolve({
  redirects: { allowedHosts: ['apps.example.com'] },
  upstreams: [
    { name: 'app', target: 'http://127.0.0.1:3000', match: { pathPrefix: '/' }, forwardAccessToken: true },
    { name: 'elsewhere', target: 'http://127.0.0.1:3001', match: { pathPrefix: '/', hosts: ['apps.example.com'] } },
    { name: 'mcp', target: 'http://127.0.0.1:3002', match: { pathPrefix: '/mcp' }, tokenAudience: 'resource', resourceMetadata: true },
    { name: 'orders', target: 'http://127.0.0.1:3003', match: { pathPrefix: '/orders' }, tokenExchange: { audience: 'orders-api' } },
  ],
})
const upstream = (name: string): UpstreamConfig => config.upstreams.find((u) => u.name === name) as UpstreamConfig

const exchanger: TokenExchanger = {
  token: async (_upstream, identity) => {
    if (identity.claims.sub === 'refused') throw new GatewayError('forbidden', 'the provider refused the exchange')
    return `exchanged-${identity.claims.sub}`
  },
  forgetToken() {},
  forget() {},
}

const answers = new Answers({
  publicUrl: PUBLIC,
  validateRedirectAfter: createRedirectAfterValidator({ publicUrl: PUBLIC, allowedHosts: config.redirects.allowedHosts }),
  credentials: new UpstreamCredentials({
    upstreams: config.upstreams,
    assertions: { header: config.assertions.header, signer: undefined },
    transactionTokens: undefined,
    exchanger,
    isGatewayCookie: (name) => name === 'ogw',
  }),
})

const alice = identityOf({ sub: 'alice', email: 'alice@example.com', groups: ['staff'] }, { accessToken: 'token-alice' })
const PAGE_LOAD = { accept: 'text/html', 'sec-fetch-mode': 'navigate' }
const PROGRAM = { accept: 'application/json' }

function request(headers: Record<string, string>, host = 'app.example.com', target = '/page?x=1'): AnsweredRequest {
  return { method: 'GET', headers, scheme: 'https', host, target, path: target.split('?')[0] ?? target, transport: 'https' }
}

async function answerOf(verdict: Verdict, req: AnsweredRequest, exit: Exit): Promise<Answer> {
  return answers.answer(verdict, req, exit)
}

function problem(answer: Answer): GatewayError {
  if (answer.kind !== 'refuse') throw new Error(`a ${answer.kind}, not a refusal`)
  return answer.error
}

t.test('a request without a sign-in: a page load is sent to sign in where the exit can, anything else is the 401', async (t) => {
  const signedOut: Verdict = { outcome: 'unauthenticated', upstream: upstream('app'), expired: false, refreshable: false }
  const back = encodeURIComponent('/page?x=1')
  // An edge asks about a request it serves: the browser comes back to its absolute URL.
  const backAbsolute = encodeURIComponent(`${PUBLIC}/page?x=1`)
  const challenge = `Bearer resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource"`
  const rows: ReadonlyArray<[string, Exit, Record<string, string>, string | number]> = [
    ['the proxy, on the public host: the path alone, the browser stays on its origin', PROXY, PAGE_LOAD, `/api/v1/openid/redirect?redirectAfter=${back}`],
    ['Envoy: the public origin', ENVOY, PAGE_LOAD, `${PUBLIC}/api/v1/openid/redirect?redirectAfter=${backAbsolute}`],
    ['Traefik: the public origin', TRAEFIK, PAGE_LOAD, `${PUBLIC}/api/v1/openid/redirect?redirectAfter=${backAbsolute}`],
    ['ingress-nginx: the 401 (it sends the browser to auth-signin itself)', NGINX, PAGE_LOAD, 401],
    ['a program at the proxy', PROXY, PROGRAM, 401],
    ['a program at Envoy', ENVOY, PROGRAM, 401],
    ['a program at Traefik', TRAEFIK, PROGRAM, 401],
  ]
  for (const [name, exit, headers, expected] of rows) {
    const answer = await answerOf(signedOut, request(headers), exit)
    if (typeof expected === 'string') {
      t.match(answer, { kind: 'sign_in', outcome: 'unauthenticated', identity: null, location: expected }, name)
    } else {
      const error = problem(answer)
      t.equal(error.status, expected, name)
      t.equal(error.code, 'unauthenticated', name)
      t.equal(error.headers['www-authenticate'], challenge, `${name}: the contract's challenge, with RFC 9728 5.1's metadata`)
      const signIn = exit === PROXY ? back : backAbsolute
      t.equal(error.extensions.signInUrl, `${PUBLIC}/api/v1/openid/redirect?redirectAfter=${signIn}`, `${name}: where to sign in`)
    }
  }
  const refreshable = await answerOf({ ...signedOut, refreshable: true }, request(PAGE_LOAD), PROXY)
  t.match(refreshable, { kind: 'sign_in', location: `/api/v1/openid/refresh?redirectAfter=${back}` }, 'a renewable session goes to the refresh endpoint')
  const expired = problem(await answerOf({ ...signedOut, expired: true }, request(PROGRAM), ENVOY))
  t.equal(
    expired.headers['www-authenticate'],
    `Bearer error="invalid_token", resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource"`,
    'an expired sign-in or a refused token: invalid_token',
  )
})

t.test('a page load on another host signs in on the public origin and comes back to its own URL', async (t) => {
  const signedOut: Verdict = { outcome: 'unauthenticated', upstream: upstream('elsewhere'), expired: false, refreshable: false }
  const back = encodeURIComponent('https://apps.example.com/page?x=1')
  for (const [name, exit] of EXITS.filter(([, exit]) => exit.redirects)) {
    const answer = await answerOf(signedOut, request(PAGE_LOAD, 'apps.example.com'), exit)
    t.match(answer, { kind: 'sign_in', location: `${PUBLIC}/api/v1/openid/redirect?redirectAfter=${back}` }, name)
  }
  const refused = await answerOf(signedOut, request(PAGE_LOAD, 'unknown.example.com'), ENVOY)
  t.match(
    refused,
    { kind: 'sign_in', location: `${PUBLIC}/api/v1/openid/redirect?redirectAfter=${encodeURIComponent('/page?x=1')}` },
    'a host the redirect rule refuses: its path only',
  )
})

t.test('an MCP upstream (tokenAudience: resource) never sends a page load to sign in: the 401 names its metadata', async (t) => {
  const signedOut: Verdict = { outcome: 'unauthenticated', upstream: upstream('mcp'), expired: false, refreshable: false }
  for (const [name, exit] of EXITS) {
    const error = problem(await answerOf(signedOut, request(PAGE_LOAD, 'app.example.com', '/mcp'), exit))
    t.equal(error.status, 401, name)
    t.equal(error.headers['www-authenticate'], `Bearer resource_metadata="${PUBLIC}/.well-known/oauth-protected-resource/mcp"`, `${name}: RFC 9728 5.1`)
  }
})

t.test('a refusal by the allow rules is the 403 naming the refused part, with who was refused', async (t) => {
  const refused: Verdict = { outcome: 'forbidden', upstream: upstream('app'), identity: alice, rulePath: '/admin' }
  for (const [name, exit] of EXITS) {
    const answer = await answerOf(refused, request(PAGE_LOAD), exit)
    t.match(answer, { kind: 'refuse', outcome: 'forbidden', identity: alice }, name)
    const error = problem(answer)
    t.equal(error.status, 403, name)
    t.equal(error.extensions.refusedPath, '/admin', name)
  }
})

t.test('a step-up: a page load signs in again where the exit can; a Bearer token, or a program, gets RFC 9470 3', async (t) => {
  const requirement = { acrValues: ['mfa'], maxAge: undefined }
  const session: Verdict = { outcome: 'step_up', upstream: upstream('app'), identity: alice, requirement, bearer: false }
  t.match(await answerOf(session, request(PAGE_LOAD), PROXY), { kind: 'sign_in', outcome: 'step_up', identity: alice }, 'the proxy: sign in again')
  t.match(
    await answerOf(session, request(PAGE_LOAD), TRAEFIK),
    { kind: 'sign_in', location: /^https:\/\/app\.example\.com\/api\/v1\/openid\/redirect/ },
    'Traefik: sign in again',
  )
  const rows: ReadonlyArray<[string, Verdict, Record<string, string>, Exit]> = [
    ['a Bearer token at the proxy', { ...session, bearer: true }, PAGE_LOAD, PROXY],
    ['a program at Envoy', session, PROGRAM, ENVOY],
    ['a page load at ingress-nginx', session, PAGE_LOAD, NGINX],
  ]
  for (const [name, verdict, headers, exit] of rows) {
    const error = problem(await answerOf(verdict, request(headers), exit))
    t.equal(error.status, 401, name)
    t.equal(error.code, 'insufficient_user_authentication', name)
    t.match(
      error.headers['www-authenticate'],
      /^Bearer error="insufficient_user_authentication", error_description="[^"]+", acr_values="mfa", resource_metadata="[^"]+"$/,
      name,
    )
  }
})

t.test("a pass carries the upstream's credentials where the exit takes them", async (t) => {
  const pass: Verdict = { outcome: 'pass', upstream: upstream('app'), identity: alice }
  const received = { ...PROGRAM, 'x-forwarded-user': 'mallory', x_forwarded_email: 'forged', cookie: 'ogw=sealed; theme=dark' }
  const req = { ...request(received), headers: received }

  const proxied = await answerOf(pass, req, PROXY)
  if (proxied.kind !== 'pass') throw new Error(proxied.kind)
  t.match(
    Object.fromEntries(proxied.headers.set),
    { 'x-forwarded-user': 'alice', 'x-forwarded-email': 'alice@example.com', authorization: 'Bearer token-alice' },
    'the proxy: under the upstream names',
  )
  t.strictSame(proxied.headers.remove, [], 'the proxy strips by pattern itself: no names')

  const envoy = await answerOf(pass, req, ENVOY)
  if (envoy.kind !== 'pass') throw new Error(envoy.kind)
  const set = Object.fromEntries(envoy.headers.set)
  t.match(
    set,
    { 'x-forwarded-user': 'alice', authorization: 'Bearer token-alice', cookie: 'theme=dark' },
    "Envoy: the same, and the client's cookies without the gateway's",
  )
  t.ok(envoy.headers.remove.includes('x_forwarded_email'), 'Envoy removes a forged copy in the spelling it came in')
  t.ok(envoy.headers.remove.includes('x-auth-request-user'), 'and every identity name of the configuration it does not set')
  t.notOk(envoy.headers.remove.includes('x-forwarded-user'), 'but not what it sets')
  for (const name of REQUEST_OVERRIDE_HEADER_NAMES) t.ok(envoy.headers.remove.includes(name), `the override ${name}`)

  for (const [name, exit] of [
    ['Traefik', TRAEFIK],
    ['ingress-nginx', NGINX],
  ] as const) {
    const answer = await answerOf(pass, req, exit)
    if (answer.kind !== 'pass') throw new Error(answer.kind)
    t.match(
      Object.fromEntries(answer.headers.set),
      { 'x-auth-request-user': 'alice', 'x-auth-request-access-token': 'token-alice' },
      `${name}: X-Auth-Request-*`,
    )
    t.notOk(
      answer.headers.set.some(([header]) => header === 'authorization'),
      `${name}: the token in its own header`,
    )
  }

  const anonymous = await answerOf({ outcome: 'pass', upstream: upstream('app'), identity: null }, req, PROXY)
  t.match(anonymous, { kind: 'pass', identity: null, headers: { set: [] } }, 'an anonymous pass sets nothing')
})

t.test('a credential that cannot be had is the refusal, never a pass without it', async (t) => {
  const exchanged = await answerOf({ outcome: 'pass', upstream: upstream('orders'), identity: alice }, request(PROGRAM), PROXY)
  if (exchanged.kind !== 'pass') throw new Error(exchanged.kind)
  t.match(Object.fromEntries(exchanged.headers.set), { authorization: 'Bearer exchanged-alice' }, "RFC 8693: the upstream's own token")
  const refusedUser = identityOf({ sub: 'refused' })
  for (const [name, exit] of EXITS) {
    const answer = await answerOf({ outcome: 'pass', upstream: upstream('orders'), identity: refusedUser }, request(PROGRAM), exit)
    t.match(answer, { kind: 'refuse', outcome: 'forbidden', identity: refusedUser }, name)
  }
})
