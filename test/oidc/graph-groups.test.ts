import t from 'tap'
import { GatewayError } from '#src/contract/errors'
import { followableNextLink, graphGroups, MAX_RETRY_AFTER_SECONDS, throttleDelaySeconds, transitiveGroupsUrl } from '#src/oidc/graph-groups'
import { groupIds, startMicrosoftGraph } from '../fixtures/microsoft-graph.ts'
import type { Teardown } from '../fixtures/stack.ts'

// Entra ID's group overage read from Microsoft Graph (src/oidc/graph-groups.ts), against the
// fixture that plays Graph by its documented rules (test/fixtures/microsoft-graph.ts).

async function graph(t: Teardown, behaviour: Parameters<typeof startMicrosoftGraph>[0]) {
  const g = await startMicrosoftGraph(behaviour)
  t.teardown(() => g.close())
  return g
}

t.test('every page is followed through @odata.nextLink, with the access token on each', async (t) => {
  const g = await graph(t, { groups: groupIds(7), pageSize: 3 })
  const groups = await graphGroups('user-token', { baseUrl: g.url, timeoutMs: 2000 })
  t.same(groups, groupIds(7))
  t.equal(g.requests.length, 3, 'three pages')
  t.ok(g.requests.every((r) => r.authorization === 'Bearer user-token'))
  t.ok(
    g.requests.every((r) => r.path === '/v1.0/me/transitiveMemberOf/microsoft.graph.group'),
    'transitive memberships, groups only',
  )
  t.match(g.requests[0]?.search, /\$select=id/)
})

t.test('a 429 is waited out for its Retry-After, then the listing goes on', async (t) => {
  const g = await graph(t, { groups: groupIds(4), pageSize: 2, throttle: 2, retryAfter: '0' })
  t.same(await graphGroups('user-token', { baseUrl: g.url, timeoutMs: 2000 }), groupIds(4))
  t.equal(g.requests.length, 4, 'two throttled, two pages')
})

t.test('throttling past the bound, or a Retry-After longer than the gateway waits, fails (502)', async (t) => {
  const many = await graph(t, { groups: groupIds(1), throttle: 10, retryAfter: '0' })
  await t.rejects(graphGroups('user-token', { baseUrl: many.url, timeoutMs: 2000 }), { code: 'provider_unavailable', status: 502 })
  const long = await graph(t, { groups: groupIds(1), throttle: 1, retryAfter: String(MAX_RETRY_AFTER_SECONDS + 1) })
  await t.rejects(graphGroups('user-token', { baseUrl: long.url, timeoutMs: 2000 }), { code: 'provider_unavailable' })
  t.equal(long.requests.length, 1, 'not retried')
})

t.test('a token Graph refuses (401) fails with what the app registration needs', async (t) => {
  const g = await graph(t, { groups: groupIds(1), acceptToken: () => false })
  const err = await graphGroups('bad-token', { baseUrl: g.url, timeoutMs: 2000 }).catch((e: unknown) => e)
  t.ok(err instanceof GatewayError)
  t.match((err as GatewayError).message, /401.*User\.Read/)
})

t.test('a next page on another origin is never fetched', async (t) => {
  const elsewhere = await graph(t, { groups: groupIds(4), pageSize: 2 })
  const g = await graph(t, { groups: groupIds(4), pageSize: 2, nextLinkOrigin: elsewhere.url })
  await t.rejects(graphGroups('user-token', { baseUrl: g.url, timeoutMs: 2000 }), { code: 'provider_unavailable' })
  t.equal(elsewhere.requests.length, 0, 'the user token never went to the other origin')
})

t.test('verdicts', async (t) => {
  t.equal(transitiveGroupsUrl('https://graph.microsoft.us/'), 'https://graph.microsoft.us/v1.0/me/transitiveMemberOf/microsoft.graph.group?$select=id&$top=999')
  t.equal(throttleDelaySeconds('3', 0), 3)
  t.equal(throttleDelaySeconds('Wed, 21 Oct 2015 07:28:00 GMT', 0), undefined, 'an HTTP-date is not waited for')
  t.equal(throttleDelaySeconds(null, 1), 2, 'no Retry-After: exponential backoff')
  t.equal(throttleDelaySeconds(String(MAX_RETRY_AFTER_SECONDS + 1), 0), undefined)
  t.ok(followableNextLink('https://graph.microsoft.com/v1.0/x?$skiptoken=a', 'https://graph.microsoft.com'))
  t.notOk(followableNextLink('https://graph.windows.net/x', 'https://graph.microsoft.com'))
  t.notOk(followableNextLink('not a url', 'https://graph.microsoft.com'))
})
