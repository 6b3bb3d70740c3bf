import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js'
import t, { type Test } from 'tap'
import { Browser } from '../fixtures/browser.ts'
import { rawRequest } from '../fixtures/http.ts'
import { CLIENT_ID, startStack, type Stack } from '../fixtures/stack.ts'

// An MCP server behind the gateway, proven with the official TypeScript SDK as both ends: the
// SDK's McpServer on its Streamable HTTP transport is the upstream (`tokenAudience: resource`),
// and the SDK's Client runs its own OAuth flow against oidc-provider as the MCP authorization
// specification (2025-06-18 and 2025-11-25, "Authorization Flow Steps") lays it out: the 401 with
// `resource_metadata` (RFC 9728 5.1), the metadata, the authorization server's metadata (RFC 8414
// / OpenID Connect Discovery), dynamic client registration (RFC 7591), the authorization code
// with PKCE and `resource` (RFC 8707 2.1), and the tool call with the token, whose audience is
// the server's resource identifier. The provider's login is the dev interactions' form, filled
// in by the test's cookie-jar browser. Tokens for any other audience are refused (RFC 8707 2,
// RFC 6750 3.1 invalid_token), and the token the SDK got is accepted by no other upstream.

/** The tool's result: the identity headers the MCP server received from the gateway. */
interface Seen {
  user?: string
  issuer?: string
  authorization?: string
}

/** An MCP server on node:http, stateless (a server and transport per request), with one tool reporting the identity headers it was sent. */
async function startMcpServer(t: Test): Promise<string> {
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const mcp = new McpServer({ name: 'whoami-server', version: '1.0.0' })
    mcp.registerTool('whoami', { description: 'The identity headers this request carried' }, (extra) => {
      const headers = extra.requestInfo?.headers ?? {}
      const one = (name: string): string | undefined => {
        const value = headers[name]
        return Array.isArray(value) ? value.join(',') : value
      }
      const seen: Seen = { user: one('x-forwarded-user'), issuer: one('x-forwarded-issuer'), authorization: one('authorization') }
      return { content: [{ type: 'text', text: JSON.stringify(seen) }] }
    })
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
    res.on('close', () => {
      void transport.close()
      void mcp.close()
    })
    void mcp
      .connect(transport)
      .then(() => transport.handleRequest(req, res))
      .catch((err: unknown) => {
        res.statusCode = 500
        res.end(String(err))
      })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** Where the provider sends the browser back: the MCP client's redirect URI, a page that just answers. */
async function startRedirectTarget(t: Test): Promise<string> {
  const server = createServer((_req, res) => res.end('signed in: back to the MCP client'))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** An OAuthClientProvider kept in memory, as an MCP host application would implement it (no mock: the SDK calls it). */
class MemoryOAuthProvider implements OAuthClientProvider {
  readonly #redirectUrl: string
  #client: OAuthClientInformationMixed | undefined
  #tokens: OAuthTokens | undefined
  #verifier = ''
  /** The authorization URL the SDK sent the user to. */
  authorizationUrl: URL | undefined

  constructor(redirectUrl: string) {
    this.#redirectUrl = redirectUrl
  }

  get redirectUrl(): string {
    return this.#redirectUrl
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'MCP SDK test client',
      redirect_uris: [this.#redirectUrl],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.#client
  }

  saveClientInformation(info: OAuthClientInformationMixed): void {
    this.#client = info
  }

  tokens(): OAuthTokens | undefined {
    return this.#tokens
  }

  saveTokens(tokens: OAuthTokens): void {
    this.#tokens = tokens
  }

  redirectToAuthorization(url: URL): void {
    this.authorizationUrl = url
  }

  saveCodeVerifier(verifier: string): void {
    this.#verifier = verifier
  }

  codeVerifier(): string {
    return this.#verifier
  }
}

function bearerAt(stack: Stack, path: string, token: string) {
  return rawRequest(stack.gw, path, {
    method: 'POST',
    headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: '{}',
  })
}

t.test('the MCP SDK client signs in through the gateway and calls a tool on the SDK server', async (t) => {
  const mcpTarget = await startMcpServer(t)
  const redirectOrigin = await startRedirectTarget(t)
  // The provider learns the resource once the gateway's port is known (it asks at each request).
  let resource = ''
  let otherResource = ''
  const stack = await startStack(t, {
    provider: { resourceServers: { accepts: (r) => r === resource || r === otherResource, scopes: ['mcp:tools'] } },
    upstreams: [
      { name: 'mcp', match: { pathPrefix: '/mcp' }, target: mcpTarget, tokenAudience: 'resource', resourceMetadata: { scopes: ['mcp:tools'] } },
      { name: 'other', match: { pathPrefix: '/other' }, tokenAudience: 'resource' },
      { name: 'app', match: { pathPrefix: '/' } },
    ],
  })
  resource = `${stack.gw}/mcp`
  otherResource = `${stack.gw}/other`
  const provider = stack.provider
  if (provider === undefined) throw new Error('the stack started no provider')

  t.test('the 401 names the metadata and the scope; the metadata names the resource and the provider', async (t) => {
    const res = await fetch(`${stack.gw}/mcp`, { method: 'POST', headers: { accept: 'application/json' } })
    t.equal(res.status, 401)
    t.equal(res.headers.get('www-authenticate'), `Bearer resource_metadata="${stack.gw}/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`)
    const metadata = (await (await fetch(`${stack.gw}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<string, unknown>
    t.equal(metadata.resource, resource)
    t.same(metadata.authorization_servers, [provider.issuer])
  })

  const oauth = new MemoryOAuthProvider(`${redirectOrigin}/callback`)
  let accessToken = ''

  t.test('the SDK meets the 401, registers, authorizes with PKCE and resource, and calls the tool', async (t) => {
    const first = new StreamableHTTPClientTransport(new URL(resource), { authProvider: oauth })
    await t.rejects(new Client({ name: 'sdk-test', version: '1.0.0' }).connect(first), { message: 'Unauthorized' }, 'the first connect needs a sign-in')
    const url = oauth.authorizationUrl
    if (url === undefined) throw new Error('the SDK sent the user nowhere')
    t.equal(url.origin, provider.issuer, 'discovered the provider from the metadata')
    t.equal(url.searchParams.get('resource'), resource, 'RFC 8707: the resource parameter is the server')
    t.equal(url.searchParams.get('code_challenge_method'), 'S256', 'PKCE')
    t.equal(url.searchParams.get('scope'), 'mcp:tools', 'the scope the challenge and metadata named')
    const clientId = url.searchParams.get('client_id')
    t.ok(clientId !== null && clientId !== CLIENT_ID, 'a client the SDK registered itself (RFC 7591)')

    const browser = new Browser()
    const back = await browser.signIn(url, 'alice', { gatewayOrigin: redirectOrigin })
    t.equal(back.status, 200)
    const code = new URL(browser.history.at(-1) ?? '').searchParams.get('code')
    if (code === null) throw new Error(`no code at ${browser.history.at(-1)}`)
    await first.finishAuth(code)
    accessToken = oauth.tokens()?.access_token ?? ''
    const claims = JSON.parse(Buffer.from(accessToken.split('.')[1] ?? '', 'base64url').toString()) as Record<string, unknown>
    t.equal(claims.aud, resource, 'the token is for the MCP server alone')

    const client = new Client({ name: 'sdk-test', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(resource), { authProvider: oauth }))
    t.teardown(() => client.close())
    const result = await client.callTool({ name: 'whoami', arguments: {} })
    const content = result.content as Array<{ type: string; text: string }>
    const seen = JSON.parse(content[0]?.text ?? '{}') as Seen
    t.equal(seen.user, 'alice', 'the tool saw the user')
    t.equal(seen.issuer, provider.issuer, 'and the issuer')
    t.equal(seen.authorization, `Bearer ${accessToken}`, 'and the token the client sent, which was issued for it')
  })

  t.test("the SDK's token is accepted at the MCP server only: no other upstream takes it (no token passthrough)", async (t) => {
    if (accessToken === '') throw new Error('the sign-in did not get a token')
    t.equal((await bearerAt(stack, '/mcp', accessToken)).status, 400, 'reaches the MCP server (whose 400 is about the JSON-RPC body)')
    const other = await bearerAt(stack, '/other', accessToken)
    t.equal(other.status, 401, 'another resource: 401, though the token was just accepted (and cached) at /mcp')
    t.match(other.headers['www-authenticate'], /^Bearer error="invalid_token", resource_metadata="[^"]+\/other"$/)
    t.equal((await bearerAt(stack, '/', accessToken)).status, 401, "an upstream that takes the provider's audiences")
  })

  t.test('tokens for another audience are refused with invalid_token', async (t) => {
    const sign = (aud: unknown): Promise<string> => provider.signJwt({ sub: 'alice', aud, client_id: 'someone', scope: 'mcp:tools' }, { typ: 'at+jwt' })
    const cases: Array<[string, unknown]> = [
      ["the gateway's client id (valid at the provider's audiences)", CLIENT_ID],
      ["another upstream's resource", otherResource],
      ['the resource and another audience', [resource, otherResource]],
      ['the resource with a trailing slash', `${resource}/`],
      ['no audience', undefined],
    ]
    for (const [what, aud] of cases) {
      const res = await bearerAt(stack, '/mcp', await sign(aud))
      t.equal(res.status, 401, what)
      t.match(res.headers['www-authenticate'], /^Bearer error="invalid_token", resource_metadata=/, `${what}: invalid_token`)
    }
    t.equal((await bearerAt(stack, '/', await sign(CLIENT_ID))).status, 200, "the client id's token is good where the provider's audiences are asked")
    t.equal((await bearerAt(stack, '/mcp', await sign([resource]))).status, 400, 'the resource alone, as a list of one: reaches the MCP server')
  })

  t.test('a browser session does not sign in at the MCP server, and a page load gets the 401, not a sign-in redirect', async (t) => {
    const browser = await stack.signedIn('alice')
    t.equal((await browser.fetch(`${stack.gw}/page`)).status, 200, 'the session signs in elsewhere')
    const res = await browser.fetch(`${stack.gw}/mcp`, { navigate: true })
    t.equal(res.status, 401)
  })
})
