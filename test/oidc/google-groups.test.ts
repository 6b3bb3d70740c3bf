import t from 'tap'
import * as jose from 'jose'
import { GatewayError } from '#src/contract/errors'
import {
  DIRECTORY_GROUP_SCOPE,
  GoogleGroups,
  groupsListUrl,
  MAX_DIRECTORY_PAGES,
  parseServiceAccount,
  SERVICE_TOKEN_MARGIN_MS,
  type ServiceAccount,
} from '#src/oidc/google-groups'
import { MAX_THROTTLE_RETRIES } from '#src/oidc/group-api'
import type { GoogleGroupsConfig } from '#src/options/types'
import { groupEmails, startGoogleDirectory, type GoogleDirectory } from '../fixtures/google-directory.ts'
import type { Teardown } from '../fixtures/stack.ts'

// Google Workspace groups (src/oidc/google-groups.ts) against the fixture that plays Google's
// token endpoint and the Directory API by their documented rules (test/fixtures/google-directory.ts):
// the token endpoint verifies the gateway's signed assertion with jose.

async function directory(t: Teardown, behaviour: Parameters<typeof startGoogleDirectory>[0] = {}): Promise<GoogleDirectory> {
  const d = await startGoogleDirectory(behaviour)
  t.teardown(() => d.close())
  return d
}

function account(d: GoogleDirectory): ServiceAccount {
  const parsed = parseServiceAccount(d.serviceAccountJson)
  if (typeof parsed === 'string') throw new Error(parsed)
  return parsed
}

function reader(
  d: GoogleDirectory,
  clock = { now: () => Date.now() },
  config: Partial<GoogleGroupsConfig> = {},
  key: ServiceAccount = account(d),
): GoogleGroups {
  return new GoogleGroups(
    { adminEmail: 'admin@example.com', tokenUrl: d.tokenUrl, directoryUrl: d.directoryUrl, serviceAccountKeyEnv: 'UNUSED', ...config },
    key,
    2000,
    clock,
  )
}

async function failure(promise: Promise<unknown>): Promise<GatewayError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  if (!(err instanceof GatewayError)) throw new Error(`expected a GatewayError, got ${String(err)}`)
  return err
}

const tokenRequests = (d: GoogleDirectory) => d.requests.filter((r) => r.kind === 'token')
const groupRequests = (d: GoogleDirectory) => d.requests.filter((r) => r.kind === 'groups')

t.test("the signed assertion Google's token endpoint verifies, then every page of the user's groups", async (t) => {
  const d = await directory(t, { users: { 'ada@example.com': groupEmails(450) } })
  t.strictSame(await reader(d).groupsOf('ada@example.com'), groupEmails(450))
  const [token] = tokenRequests(d)
  t.equal(token?.error, undefined, 'the token endpoint accepted the assertion')
  t.equal(token?.claims?.iss, d.clientEmail, 'iss: the service account')
  t.equal(token?.claims?.sub, 'admin@example.com', 'sub: the administrator acted as')
  t.equal(token?.claims?.aud, d.tokenUrl, 'aud: the token endpoint')
  t.equal(token?.claims?.scope, DIRECTORY_GROUP_SCOPE)
  t.equal(Number(token?.claims?.exp) - Number(token?.claims?.iat), 3600, 'an hour, the longest Google accepts')
  const pages = groupRequests(d)
  t.equal(pages.length, 3, 'three pages of 200')
  t.strictSame(
    pages.map((r) => r.query?.get('userKey')),
    ['ada@example.com', 'ada@example.com', 'ada@example.com'],
  )
  t.equal(pages[0]?.query?.get('maxResults'), '200')
  t.equal(pages[0]?.query?.get('pageToken'), null)
  t.type(pages[1]?.query?.get('pageToken'), 'string', 'nextPageToken followed')
})

t.test('a user in no group: groups is absent from the answer, the list is empty', async (t) => {
  const d = await directory(t, { users: { 'ada@example.com': [] } })
  t.strictSame(await reader(d).groupsOf('ada@example.com'), [])
})

t.test('the service token is cached until shortly before it expires, and shared by concurrent lookups', async (t) => {
  const d = await directory(t, { users: { 'ada@example.com': ['a@example.com'] } })
  let now = Date.now()
  const groups = reader(d, { now: () => now })
  await Promise.all([groups.groupsOf('ada@example.com'), groups.groupsOf('ada@example.com'), groups.groupsOf('ada@example.com')])
  t.equal(tokenRequests(d).length, 1, 'one token for three concurrent lookups')
  now += 3600_000 - SERVICE_TOKEN_MARGIN_MS - 1000
  await groups.groupsOf('ada@example.com')
  t.equal(tokenRequests(d).length, 1, 'still cached')
  now += 2000
  await groups.groupsOf('ada@example.com')
  t.equal(tokenRequests(d).length, 2, 'renewed within the margin')
})

t.test('a token the Directory refuses (401) is replaced once; twice refused fails', async (t) => {
  const d = await directory(t, { users: { 'ada@example.com': ['a@example.com'] } })
  const groups = reader(d)
  await groups.groupsOf('ada@example.com')
  d.revokeTokens()
  t.strictSame(await groups.groupsOf('ada@example.com'), ['a@example.com'], 'a new token was asked for')
  t.equal(tokenRequests(d).length, 2)
})

t.test('missing delegation (unauthorized_client) and an unknown administrator (invalid_grant) fail naming the cause', async (t) => {
  const d = await directory(t, { users: { 'ada@example.com': [] }, delegation: false })
  const err = await failure(reader(d).groupsOf('ada@example.com'))
  t.equal(err.status, 502)
  t.match(err.message, /unauthorized_client.*domain-wide delegation.*admin\.directory\.group\.readonly/)
  t.equal(groupRequests(d).length, 0, 'no Directory call without a token')
  d.set({ delegation: true })
  t.match(
    (await failure(reader(d, undefined, { adminEmail: 'nobody@example.com' }).groupsOf('ada@example.com'))).message,
    /invalid_grant.*Invalid email or User ID.*adminEmail/,
  )
})

t.test('an assertion signed by another key is refused by the token endpoint (invalid_grant)', async (t) => {
  const d = await directory(t, { users: { 'ada@example.com': [] } })
  const other = await directory(t)
  const err = await failure(reader(d, undefined, {}, { ...account(other), clientEmail: d.clientEmail }).groupsOf('ada@example.com'))
  t.match(err.message, /invalid_grant.*Invalid JWT Signature/)
  t.equal(tokenRequests(d)[0]?.error, 'invalid_grant')
})

t.test('a failed token request is not cached: the next lookup asks again', async (t) => {
  const d = await directory(t, { users: { 'ada@example.com': ['a@example.com'] }, delegation: false })
  const groups = reader(d)
  await failure(groups.groupsOf('ada@example.com'))
  d.set({ delegation: true })
  t.strictSame(await groups.groupsOf('ada@example.com'), ['a@example.com'])
})

t.test('403 rateLimitExceeded and 429 are waited out; past the bound, or any other 403, fail', async (t) => {
  const d = await directory(t, { users: { 'ada@example.com': ['a@example.com'] }, throttle: 2, throttleStatus: 403, retryAfter: '0' })
  t.strictSame(await reader(d).groupsOf('ada@example.com'), ['a@example.com'])
  t.equal(groupRequests(d).length, 3, '403 rateLimitExceeded twice, then the page')
  const r429 = await directory(t, { users: { 'ada@example.com': ['a@example.com'] }, throttle: 1, throttleStatus: 429, retryAfter: '0' })
  t.strictSame(await reader(r429).groupsOf('ada@example.com'), ['a@example.com'], '429 waited out')
  const many = await directory(t, { users: { 'ada@example.com': ['a@example.com'] }, throttle: 10, retryAfter: '0' })
  t.match((await failure(reader(many).groupsOf('ada@example.com'))).message, /throttled/)
  t.equal(groupRequests(many).length, MAX_THROTTLE_RETRIES + 1)
  const forbidden = await directory(t, { users: { 'ada@example.com': ['a@example.com'] }, forbidden: true })
  t.match((await failure(reader(forbidden).groupsOf('ada@example.com'))).message, /403 \(forbidden\).*administrator/)
  t.equal(groupRequests(forbidden).length, 1, 'a 403 that is not a rate limit is not retried')
})

t.test('a user the Directory does not know fails (404): no session on groups that could not be read', async (t) => {
  const d = await directory(t, { users: {} })
  t.match((await failure(reader(d).groupsOf('stranger@gmail.com'))).message, /HTTP 404 \(notFound\)/)
})

t.test('more pages than the bound fails', async (t) => {
  const d = await directory(t, { users: { 'ada@example.com': groupEmails(200 * MAX_DIRECTORY_PAGES + 1) } })
  t.match((await failure(reader(d).groupsOf('ada@example.com'))).message, /more than 25 pages/)
})

t.test('verdicts', async (t) => {
  t.type(parseServiceAccount('not json'), 'string')
  t.type(parseServiceAccount('{"type":"authorized_user"}'), 'string', 'a user credential is not a service account')
  t.type(parseServiceAccount('{"type":"service_account","client_email":"a@b.c"}'), 'string', 'no private key')
  const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true })
  const pem = await jose.exportPKCS8(privateKey)
  const account = parseServiceAccount(JSON.stringify({ type: 'service_account', client_email: 'a@b.c', private_key: pem }))
  t.match(account, { clientEmail: 'a@b.c', privateKeyId: undefined })
  t.equal(typeof account === 'string' ? undefined : account.privateKey.asymmetricKeyType, 'rsa', 'the key parsed once')
  t.match(parseServiceAccount(JSON.stringify({ type: 'service_account', client_email: 'a@b.c', private_key: 'not a key' })), /private_key that is not a key/)
  t.match(
    parseServiceAccount(
      JSON.stringify({ type: 'service_account', client_email: 'a@b.c', private_key: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n' }),
    ),
    /private_key that is not a readable private key/,
    'a broken PEM',
  )
  const ec = await jose.exportPKCS8((await jose.generateKeyPair('ES256', { extractable: true })).privateKey)
  t.match(
    parseServiceAccount(JSON.stringify({ type: 'service_account', client_email: 'a@b.c', private_key: ec })),
    /not an RSA key/,
    'an EC key cannot sign RS256',
  )
  t.equal(
    groupsListUrl('https://admin.googleapis.com/', 'ada+x@example.com', 'tok/en'),
    'https://admin.googleapis.com/admin/directory/v1/groups?userKey=ada%2Bx%40example.com&maxResults=200&pageToken=tok%2Fen',
  )
})
