import t from 'tap'
import { startStack, type StackOptions } from '../fixtures/stack.ts'

// Every 403 of the `allow` rules says in the log who was refused, where, by
// which rule and why; a rule that needs a claim the sessions do not carry warns once.

const JSON_ACCEPT = { accept: 'application/json' }

type Line = Record<string, unknown>
/** A subtest's `t` (the last overload of t.test takes only the callback). */
type Test = Parameters<Parameters<typeof t.test>[0]>[0]

async function stackWithLog(t: Test, options: StackOptions) {
  const lines: Line[] = []
  const stack = await startStack(t, {
    ...options,
    config: { ...options.config, log: { level: 'info' } },
    logStream: { write: (line) => void lines.push(JSON.parse(line) as Line) },
  })
  return { stack, lines }
}

t.test('a 403 names the sub, the upstream, the rule and the reason', async (t) => {
  const { stack, lines } = await stackWithLog(t, {
    upstreams: [{ name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['admins'] } }, { name: 'app' }],
  })
  const bob = await stack.signedIn('bob')
  const res = await bob.fetch(`${stack.gw}/admin/x`, { headers: JSON_ACCEPT })
  t.equal(res.status, 403)
  const refusals = lines.filter((l) => l.msg === 'access refused by the allow rules')
  t.equal(refusals.length, 1)
  t.match(refusals[0], { level: 30, sub: 'bob', upstream: 'admin', rule: 'groups', reason: 'none of the groups is one of allow.groups' })
  t.ok(typeof refusals[0]?.reqId === 'string', 'on the request logger')
  t.notOk(
    lines.some((l) => l.level === 40),
    'bob has a groups claim: no warning',
  )
  const alice = await stack.signedIn('alice')
  t.equal((await alice.fetch(`${stack.gw}/admin/x`, { headers: JSON_ACCEPT })).status, 200)
  t.equal(lines.filter((l) => l.msg === 'access refused by the allow rules').length, 1, 'a pass logs no refusal')
})

t.test('a claim the sessions do not carry: the 403 says so, and a warning comes once per upstream and claim', async (t) => {
  // No `groups` scope: the provider leaves the groups claim out of the ID token.
  const { stack, lines } = await stackWithLog(t, {
    config: { provider: { scopes: ['openid', 'profile', 'email'] } },
    upstreams: [
      { name: 'admin', match: { pathPrefix: '/admin' }, allow: { groups: ['admins'] } },
      { name: 'ops', match: { pathPrefix: '/ops' }, allow: { groups: ['admins'], claims: { tenant: ['acme'] } } },
      { name: 'app' },
    ],
  })
  const alice = await stack.signedIn('alice')
  for (let i = 0; i < 3; i++) t.equal((await alice.fetch(`${stack.gw}/admin/x`, { headers: JSON_ACCEPT })).status, 403)
  t.equal((await alice.fetch(`${stack.gw}/ops/x`, { headers: JSON_ACCEPT })).status, 403)
  const refusals = lines.filter((l) => l.msg === 'access refused by the allow rules')
  t.equal(refusals.length, 4, 'every 403 is logged')
  t.match(refusals[0], {
    sub: 'alice',
    upstream: 'admin',
    rule: 'groups',
    reason: 'the session has no `groups` claim: request the scope or mapper that adds it',
  })
  const warnings = lines.filter((l) => l.level === 40)
  t.equal(warnings.length, 2, 'once for admin+groups, once for ops+groups')
  t.match(warnings, [
    { upstream: 'admin', rule: 'groups', claim: 'groups', msg: /needs the `groups` claim.*request the scope or mapper/ },
    { upstream: 'ops', rule: 'groups', claim: 'groups' },
  ])
  t.notMatch(JSON.stringify(lines), /alice@example\.com/, 'no claim values in the log')
})
