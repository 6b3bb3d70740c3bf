// Forward-auth answers carry the signed identity assertion, and an ingress told to copy it hands
// it to the application, which verifies it against the gateway's JWKS
// (docs/features/identity-assertions.md "Behind an ingress or Envoy"): a real Traefik running
// docs/deploy/traefik.md's middleware with the assertion header added to authResponseHeaders, and
// a real nginx running docs/deploy/nginx.md with the two lines that page gives. Either way the
// client's own copy never reaches the application: replaced when the answer has one, removed when
// it has none.

import { generateKeyPairSync } from 'node:crypto'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as jose from 'jose'
import t from 'tap'
import YAML from 'yaml'
import { rawRequest } from '../fixtures/http.ts'
import { recipe } from '../fixtures/markdown.ts'
import { requireNginx, startNginx } from '../fixtures/nginx.ts'
import { gatewayCookies, reservePort, startStack, type Stack } from '../fixtures/stack.ts'
import { startTraefik } from '../fixtures/traefik.ts'

const dir = mkdtempSync(join(tmpdir(), 'ogw-fa-assertion-'))
const keyPath = join(dir, 'key.pem')
writeFileSync(keyPath, generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'pem', type: 'pkcs8' }))
const FORGED = 'eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.'
const HEADER = 'x-identity-assertion'

/** What the application does (docs/features/identity-assertions.md). */
async function verified(stack: Stack, assertion: string | string[] | undefined): Promise<jose.JWTPayload> {
  if (typeof assertion !== 'string') throw new Error(`no single assertion: ${String(assertion)}`)
  const jwks = jose.createRemoteJWKSet(new URL(`${stack.gw}/.well-known/jwks.json`))
  return (await jose.jwtVerify(assertion, jwks, { issuer: stack.gw, audience: 'app' })).payload
}

const stack = await startStack(t, {
  config: { assertions: { signingKeys: [keyPath] } },
  upstreams: [{ name: 'app', publicPaths: ['/public/**'], identityAssertion: true }],
})
const cookie = await gatewayCookies(stack, 'alice')
const atApp = (): string | string[] | undefined => stack.upstream.requests.at(-1)?.headers[HEADER]

t.test('Traefik: the assertion header in authResponseHeaders', async (t) => {
  const middleware = (YAML.parse(recipe('docs/deploy/traefik.md', 'yaml')) as { spec: { forwardAuth: Record<string, unknown> } }).spec.forwardAuth
  const listed = middleware.authResponseHeaders as string[]
  t.notOk(
    listed.some((name) => name.toLowerCase() === HEADER),
    'the page lists it only for those who turn it on',
  )
  const traefik = await startTraefik(t, {
    forwardAuth: {
      ...middleware,
      address: `${stack.gw}${new URL(String(middleware.address)).pathname}`,
      authResponseHeaders: [...listed, 'X-Identity-Assertion'],
    },
    app: stack.upstream.url,
  })
  const res = await rawRequest(traefik.url, '/orders', { headers: { cookie, accept: 'application/json', [HEADER]: FORGED } })
  t.equal(res.status, 200)
  const payload = await verified(stack, atApp())
  t.equal(payload.sub, 'alice')
  t.equal(payload.email, 'alice@example.com')
  const anonymous = await rawRequest(traefik.url, '/public/logo.png', { headers: { [HEADER]: FORGED } })
  t.equal(anonymous.status, 200)
  t.equal(atApp(), undefined, "an answer without one: Traefik deletes the client's copy")
})

t.test('nginx: the two lines docs/features/identity-assertions.md gives, added to docs/deploy/nginx.md', async (t) => {
  requireNginx()
  const page = readFileSync('docs/features/identity-assertions.md', 'utf8')
  const lines = [/`(auth_request_set \$assertion \$upstream_http_x_identity_assertion;)`/, /`(proxy_set_header X-Identity-Assertion \$assertion;)`/].map(
    (re) => {
      const m = re.exec(page)
      if (m?.[1] === undefined) throw new Error(`docs/features/identity-assertions.md no longer names ${String(re)}`)
      return `        ${m[1]}\n`
    },
  )
  const copied = '        proxy_set_header X-Auth-Request-Auth-Time $auth_auth_time;\n'
  const recipePage = recipe('docs/deploy/nginx.md', 'nginx')
  t.ok(recipePage.includes(copied), 'the recipe has the line the copy goes after')
  const reserved = await reservePort()
  const servers = recipePage
    .replace(copied, `${copied}${lines.join('')}`)
    .replaceAll('https://auth.example.com', stack.gw)
    .replaceAll('127.0.0.1:8080', new URL(stack.gw).host)
    .replaceAll('127.0.0.1:3000', new URL(stack.upstream.url).host)
    .replaceAll('app.example.com', '127.0.0.1')
  const nginx = await startNginx(t, servers, reserved)
  const res = await rawRequest(nginx.url, '/orders', { headers: { cookie, accept: 'application/json', [HEADER]: FORGED } })
  t.equal(res.status, 200)
  t.equal((await verified(stack, atApp())).sub, 'alice')
  const anonymous = await rawRequest(nginx.url, '/public/logo.png', { headers: { [HEADER]: FORGED } })
  t.equal(anonymous.status, 200)
  t.equal(atApp(), undefined, 'an answer without one: nginx sends the empty value as no header')
})
