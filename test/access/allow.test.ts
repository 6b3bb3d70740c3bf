import t from 'tap'
import fc from 'fast-check'
import { createAllowPolicy } from '#src/access/allow'
import type { AllowRules } from '#src/options/types'

/** The policy as a yes/no answer; the refusal's fields have their own tests below. */
function allowOf(rules: AllowRules): (claims: Record<string, unknown>) => boolean {
  const policy = createAllowPolicy(rules)
  return (claims) => policy(claims, 'default').allowed
}

const NUM_RUNS = 2000

t.test('no rules: everyone signed in', async (t) => {
  for (const rules of [{}, { emails: [], emailDomains: [], groups: [], claims: {} }]) {
    const allow = allowOf(rules)
    t.equal(allow({}), true)
    t.equal(allow({ sub: 'x', email: 'a@b.c', email_verified: false }), true)
  }
})

t.test('emails: exact whole address, ASCII case-insensitive', async (t) => {
  const allow = allowOf({ emails: ['Alice@Example.com', 'bob@example.com'] })
  t.equal(allow({ email: 'alice@example.com' }), true)
  t.equal(allow({ email: 'ALICE@EXAMPLE.COM' }), true)
  t.equal(allow({ email: 'bob@example.com', email_verified: true }), true)
  t.equal(allow({ email: 'carol@example.com' }), false)
  t.equal(allow({ email: 'alice@example.com.evil' }), false)
  t.equal(allow({ email: 'xalice@example.com' }), false)
  t.equal(allow({ email: 'alice@example.co' }), false)
  t.equal(allow({}), false, 'no email')
  t.equal(allow({ email: '' }), false)
  t.equal(allow({ email: ['alice@example.com'] }), false, 'not a string')
  t.equal(allow({ emails: 'alice@example.com' }), false, 'only the email claim counts')
  t.equal(allow({ mail: 'alice@example.com', upn: 'alice@example.com' }), false)
})

t.test('email_verified false never matches (unverified addresses are attacker-chosen)', async (t) => {
  const byEmail = allowOf({ emails: ['alice@example.com'] })
  const byDomain = allowOf({ emailDomains: ['example.com'] })
  for (const allow of [byEmail, byDomain]) {
    t.equal(allow({ email: 'alice@example.com', email_verified: false }), false)
    t.equal(allow({ email: 'alice@example.com', email_verified: 'false' }), false, 'Cognito sends strings')
    t.equal(allow({ email: 'alice@example.com', email_verified: true }), true)
    t.equal(allow({ email: 'alice@example.com', email_verified: 'true' }), true)
    t.equal(allow({ email: 'alice@example.com' }), true, 'absent: accepted (Entra never sends it)')
  }
})

t.test('email_verified: only true or "true" count as verified', async (t) => {
  for (const rules of [{ emails: ['alice@example.com'] }, { emailDomains: ['example.com'] }]) {
    const allow = allowOf(rules)
    for (const value of ['False', 'FALSE', 0, 1, 'no', 'yes', '', 'TRUE', 'True', null, [], {}, [true], 'true ']) {
      t.equal(allow({ email: 'alice@example.com', email_verified: value }), false, `${JSON.stringify(value)} (${Object.keys(rules)[0]})`)
    }
    t.equal(allow({ email: 'alice@example.com', email_verified: true }), true)
    t.equal(allow({ email: 'alice@example.com', email_verified: 'true' }), true)
  }
})

t.test('refusals name the rule and the reason', async (t) => {
  const emails = createAllowPolicy({ emails: ['alice@example.com'] })
  t.same(emails({ sub: 'x' }, 'default'), {
    allowed: false,
    rule: 'emails',
    reason: 'the session has no `email` claim: request the scope or mapper that adds it',
    missingClaim: 'email',
  })
  t.same(emails({ email: 'alice@example.com', email_verified: 'no' }, 'default'), {
    allowed: false,
    rule: 'emails',
    reason: '`email_verified` is present and not true',
  })
  t.same(emails({ email: 42 }, 'default'), { allowed: false, rule: 'emails', reason: 'the `email` claim is not a non-empty string' })
  t.same(emails({ email: 'bob@example.com' }, 'default'), { allowed: false, rule: 'emails', reason: 'the email is not one of allow.emails' })
  t.same(emails({ email: 'alice@example.com' }, 'default'), { allowed: true })
  const domains = createAllowPolicy({ emailDomains: ['example.com'] })
  t.match(domains({}, 'default'), { allowed: false, rule: 'emailDomains', missingClaim: 'email' })
  t.same(domains({ email: 'a@evil.com' }, 'default'), { allowed: false, rule: 'emailDomains', reason: 'the email domain is not one of allow.emailDomains' })
  const groups = createAllowPolicy({ groups: ['admins'] })
  t.same(groups({ sub: 'bob' }, 'default'), {
    allowed: false,
    rule: 'groups',
    reason: 'the session has no `groups` claim: request the scope or mapper that adds it',
    missingClaim: 'groups',
  })
  t.same(groups({ groups: ['staff'] }, 'default'), { allowed: false, rule: 'groups', reason: 'none of the groups is one of allow.groups' })
  t.same(groups({ groups: 42 }, 'default'), { allowed: false, rule: 'groups', reason: 'none of the groups is one of allow.groups' }, 'present, wrong type')
  const claims = createAllowPolicy({ claims: { tenant: ['acme'] } })
  t.same(claims({}, 'default'), {
    allowed: false,
    rule: 'claims',
    reason: 'the session has no `tenant` claim: request the scope or mapper that adds it',
    missingClaim: 'tenant',
  })
  t.same(claims({ tenant: 'other' }, 'default'), { allowed: false, rule: 'claims', reason: 'the `tenant` claim has none of the accepted values' })
  t.same(createAllowPolicy({})({}, 'default'), { allowed: true })
})

t.test('Unicode case mapping cannot forge an address', async (t) => {
  // KELVIN SIGN lowercases to ASCII k; LATIN CAPITAL I WITH DOT lowercases to i + U+0307.
  const allow = allowOf({ emails: ['kate@example.com'] })
  t.equal('\u212Aate@example.com'.toLowerCase(), 'kate@example.com', 'the trap exists')
  t.equal(allow({ email: '\u212Aate@example.com' }), false)
  const domains = allowOf({ emailDomains: ['kelvin.example'] })
  t.equal(domains({ email: 'a@\u212Aelvin.example' }), false)
  t.equal(domains({ email: 'a@KELVIN.example' }), true)
})

t.test('emailDomains: the part after the only @', async (t) => {
  const allow = allowOf({ emailDomains: ['example.com', '.corp.example', '*.wild.example'] })
  t.equal(allow({ email: 'a@example.com' }), true)
  t.equal(allow({ email: 'a@EXAMPLE.COM' }), true)
  t.equal(allow({ email: 'a@sub.example.com' }), false, 'plain entry: exact domain only')
  t.equal(allow({ email: 'a@evilexample.com' }), false)
  t.equal(allow({ email: 'a@example.com.evil' }), false)
  t.equal(allow({ email: 'a@example.com.' }), false, 'trailing dot is another domain')
  t.equal(allow({ email: 'a@x.corp.example' }), true, '.domain: subdomain')
  t.equal(allow({ email: 'a@x.y.corp.example' }), true, '.domain: any depth')
  t.equal(allow({ email: 'a@corp.example' }), false, '.domain: not the bare domain')
  t.equal(allow({ email: 'a@evilcorp.example' }), false, 'dot boundary')
  t.equal(allow({ email: 'a@.corp.example' }), false, 'empty label')
  t.equal(allow({ email: 'a@x.wild.example' }), true, '*.domain is .domain')
  t.equal(allow({ email: 'a@wild.example' }), false)
  // zero or several @ never match a domain rule
  t.equal(allow({ email: 'example.com' }), false, 'no @')
  t.equal(allow({ email: 'a@evil.com@example.com' }), false, 'two @, allowed last')
  t.equal(allow({ email: 'a@example.com@evil.com' }), false, 'two @, allowed first')
  t.equal(allow({ email: '"a@b"@example.com' }), false, 'quoted local part with @')
  t.equal(allow({ email: '@example.com' }), false, 'empty local part')
  t.equal(allow({ email: 'a@' }), false, 'empty domain')
})

t.test('emailDomains entries are validated', async (t) => {
  for (const entry of ['', '.', '*.', 'a@example.com', 'exa mple.com']) {
    t.throws(() => createAllowPolicy({ emailDomains: [entry] }), TypeError, JSON.stringify(entry))
  }
})

t.test('groups: any of, array or single string, case-sensitive', async (t) => {
  const allow = allowOf({ groups: ['admins', '/ops'] })
  t.equal(allow({ groups: ['users', 'admins'] }), true)
  t.equal(allow({ groups: ['/ops'] }), true)
  t.equal(allow({ groups: 'admins' }), true, 'single string')
  t.equal(allow({ groups: ['Admins'] }), false, 'case-sensitive')
  t.equal(allow({ groups: ['users'] }), false)
  t.equal(allow({ groups: [] }), false)
  t.equal(allow({ groups: 'admins,users' }), false, 'a string is one group, not a list')
  t.equal(allow({ groups: [['admins']] }), false, 'nested array')
  t.equal(allow({ groups: { admins: true } }), false, 'object')
  t.equal(allow({ groups: [null, 1, 'admins'] }), true, 'non-strings skipped')
  t.equal(allow({}), false)
  t.equal(allow({ roles: ['admins'] }), false, 'only the groups claim')
})

t.test('claims: value or any element, compared as strings', async (t) => {
  const allow = allowOf({ claims: { tenant: ['42', 'acme'], mfa: [true], level: [3] } })
  t.equal(allow({ tenant: 'acme', mfa: true, level: 3 }), true)
  t.equal(allow({ tenant: 42, mfa: 'true', level: '3' }), true, 'numbers and booleans stringified')
  t.equal(allow({ tenant: ['x', 'acme'], mfa: [false, true], level: [1, 3] }), true, 'any element')
  t.equal(allow({ tenant: 'other', mfa: true, level: 3 }), false)
  t.equal(allow({ tenant: 'acme', mfa: false, level: 3 }), false)
  t.equal(allow({ tenant: 'acme', mfa: 'TRUE', level: 3 }), false, 'no case folding')
  t.equal(allow({ tenant: 'acme', mfa: true, level: 3.5 }), false)
  t.equal(allow({ tenant: 'acme', mfa: true }), false, 'missing claim')
  t.equal(allow({ tenant: 'acme', mfa: true, level: null }), false, 'null')
  t.equal(allow({ tenant: 'acme', mfa: true, level: { value: 3 } }), false, 'object')
  t.equal(allow({ tenant: [['acme']], mfa: true, level: 3 }), false, 'nested array')
  t.equal(allow({ tenant: 'acme', mfa: true, level: Number.NaN }), false, 'NaN')
  const inf = allowOf({ claims: { x: ['Infinity'] } })
  t.equal(inf({ x: Number.POSITIVE_INFINITY }), false, 'non-finite numbers never match')
})

t.test('claims: only own properties count', async (t) => {
  const allow = allowOf({ claims: { role: ['admin'] } })
  t.equal(allow(Object.create({ role: 'admin' }) as Record<string, unknown>), false, 'inherited value')
  t.equal(allow({ role: 'admin' }), true)
  const proto = allowOf({ claims: JSON.parse('{"__proto__": ["x"], "constructor": ["x"]}') as Record<string, string[]> })
  t.equal(proto({}), false)
  t.equal(proto(JSON.parse('{"__proto__": "x", "constructor": "x"}') as Record<string, unknown>), true)
  const groups = allowOf({ groups: ['admins'] })
  t.equal(groups(Object.create({ groups: ['admins'] }) as Record<string, unknown>), false)
  const email = allowOf({ emails: ['a@example.com'] })
  t.equal(email(Object.create({ email: 'a@example.com' }) as Record<string, unknown>), false)
  t.equal(
    email(Object.assign(Object.create({ email_verified: false }) as Record<string, unknown>, { email: 'a@example.com' })),
    true,
    "inherited email_verified is not the token's",
  )
})

t.test('a named claim with no accepted values never passes', async (t) => {
  const allow = allowOf({ claims: { role: [] } })
  t.equal(allow({ role: 'admin' }), false)
  t.equal(allow({}), false)
})

t.test('AND across kinds, OR within a kind', async (t) => {
  const allow = allowOf({
    emailDomains: ['example.com'],
    groups: ['admins', 'ops'],
    claims: { tenant: ['acme'] },
  })
  const ok = { email: 'a@example.com', groups: ['ops'], tenant: 'acme' }
  t.equal(allow(ok), true)
  t.equal(allow({ ...ok, email: 'a@evil.com' }), false, 'domain fails')
  t.equal(allow({ ...ok, groups: ['users'] }), false, 'groups fail')
  t.equal(allow({ ...ok, tenant: 'other' }), false, 'claim fails')
  const both = allowOf({ emails: ['a@example.com'], emailDomains: ['corp.example'] })
  t.equal(both({ email: 'a@example.com' }), false, 'emails and emailDomains are both required')
  t.equal(allowOf({ emails: ['a@corp.example'], emailDomains: ['corp.example'] })({ email: 'a@corp.example' }), true)
})

const label = fc.constantFrom('example', 'corp', 'a', 'EXAMPLE', 'evil', 'examplecom', 'com', 'sub')
const domainArb = fc.array(label, { minLength: 1, maxLength: 4 }).map((ls) => ls.join('.'))
const localArb = fc.constantFrom('a', 'alice', 'A', 'x.y', 'a+b')

t.test('property: emailDomains model', async (t) => {
  fc.assert(
    fc.property(domainArb, localArb, domainArb, fc.boolean(), (rule, local, domain, dotted) => {
      const allow = allowOf({ emailDomains: [dotted ? `.${rule}` : rule] })
      const d = domain.toLowerCase()
      const r = rule.toLowerCase()
      const want = dotted ? d.endsWith(`.${r}`) : d === r
      return allow({ email: `${local}@${domain}` }) === want
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('model holds')
})

t.test('property: several @ or an unverified email never match', async (t) => {
  fc.assert(
    fc.property(localArb, domainArb, domainArb, (local, d1, d2) => {
      const allow = allowOf({ emailDomains: [d1, d2, `.${d1}`, `.${d2}`] })
      const byEmail = allowOf({ emails: [`${local}@${d1}`] })
      return (
        !allow({ email: `${local}@${d1}@${d2}` }) &&
        !allow({ email: `${local}@${d2}`, email_verified: false }) &&
        !byEmail({ email: `${local}@${d1}`, email_verified: false }) &&
        byEmail({ email: `${local}@${d1}`.toUpperCase() })
      )
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('never match')
})

t.test('property: claims model', async (t) => {
  const prim = fc.oneof(fc.constantFrom('a', 'b', '1', 'true'), fc.constantFrom(1, 2), fc.boolean())
  fc.assert(
    fc.property(fc.array(prim, { maxLength: 3 }), fc.oneof(prim, fc.array(prim, { maxLength: 3 })), (accepted, value) => {
      const allow = allowOf({ claims: { c: accepted } })
      const acceptedStrings = new Set(accepted.map(String))
      const values = Array.isArray(value) ? value : [value]
      return allow({ c: value }) === values.some((v) => acceptedStrings.has(String(v)))
    }),
    { numRuns: NUM_RUNS },
  )
  t.pass('model holds')
})

t.test("providers: the identity's provider must be listed, before any rule on claims", async (t) => {
  const staffAdmins = createAllowPolicy({ providers: ['staff'], groups: ['admins'] })
  t.same(staffAdmins({ groups: ['admins'] }, 'staff'), { allowed: true })
  t.same(
    staffAdmins({ groups: ['admins'] }, 'partners'),
    { allowed: false, rule: 'providers', reason: 'the provider is not one of allow.providers' },
    "a partner's admins are not the staff's",
  )
  const onlyProviders = createAllowPolicy({ providers: ['staff', 'partners'] })
  t.equal(onlyProviders({}, 'partners').allowed, true)
  t.equal(onlyProviders({}, 'other').allowed, false)
})
