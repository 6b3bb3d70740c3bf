import t from 'tap'
import type { AllowRefusal } from '#src/access/allow'
import type { Authentication, AuthenticationResult } from '#src/access/authenticate'
import {
  AccessDecisions,
  UpstreamAccess,
  forbiddenError,
  isPreflight,
  logForbidden,
  logStepUp,
  offersSignIn,
  optionalSignIn,
  signInLocation,
  stepUpError,
  unauthenticatedError,
  type AccessDecision,
  type AccessRequest,
  type DecisionRequest,
  type StepUpJudge,
} from '#src/access/decision'
import { claimMappingOf } from '#src/contract/claim-path'
import type { GatewayError } from '#src/contract/errors'
import type { Identity } from '#src/contract/identity'
import type { UpstreamConfig } from '#src/options/types'
import { createRedirectAfterValidator } from '#src/routes/redirect-after'
import { CLIENT_SECRET, resolve, withUpstream, type Tree } from '../fixtures/config/base.ts'
import { identityOf, recordedLog } from '../fixtures/decision-inputs.ts'

// The access decision of access/decision.ts without Fastify, table by table: an UpstreamAccess
// built from a real normalized configuration (the loader's resolveConfig) over a stub
// authentication that answers each AuthenticationResult, and the answers every exit renders alike
// (the 401 of RFC 6750 3.1, the step-up 401 of RFC 9470 3, the 403 of the allow rules, where a
// browser signs in). What a real session or token makes of a request is test/e2e/'s; here each
// row names one behaviour of the decision, so a changed rule fails the row that states it.

/** Epoch seconds of the judge's clock in the step-up rows. */
const NOW = 1_800_000_000
/** Each provider's clock tolerance (providers[].clockToleranceSeconds), as the judge reports it. */
const TOLERANCE: Readonly<Record<string, number>> = { default: 30, partner: 0 }
const JUDGE: StepUpJudge = { nowSeconds: () => NOW, toleranceSeconds: (provider) => TOLERANCE[provider] ?? 0 }

/** The one upstream of the minimal configuration changed by `patch`, normalized by the loader. */
function upstreamOf(patch: Tree = {}): UpstreamConfig {
  return resolve(withUpstream(patch)).upstreams[0]!
}

/** What authentication was asked, and with which host. */
interface Asked {
  hosts: Array<string | undefined>
}

/** An UpstreamAccess whose authentication answers `result`, recording each time it is asked. */
function accessOf(upstream: UpstreamConfig, result: AuthenticationResult, judge: StepUpJudge = JUDGE): { access: UpstreamAccess; asked: Asked } {
  const asked: Asked = { hosts: [] }
  const access = new UpstreamAccess(
    upstream,
    {
      authenticate: async (_req, _reply, host) => {
        asked.hosts.push(host)
        return result
      },
    },
    judge,
  )
  return { access, asked }
}

const { log } = recordedLog()
const reply = { setCookie: () => undefined }

function requestOf(path: string, authorization?: string): DecisionRequest {
  return { url: path, cookies: {}, headers: authorization === undefined ? {} : { authorization }, log }
}

const ALICE = identityOf({ sub: 'alice', email: 'alice@example.com', groups: ['admins', 'staff'] })
const BOB = identityOf({ sub: 'bob', email: 'bob@example.com', groups: ['staff'] })
const CAROL = identityOf({ sub: 'carol', groups: ['guests'] })
const ANONYMOUS: AccessDecision = { outcome: 'pass', identity: null }
const SIGN_IN: AccessDecision = { outcome: 'unauthenticated', expired: false, refreshable: false }
const EXPIRED: AccessDecision = { outcome: 'unauthenticated', expired: true, refreshable: false }
const pass = (identity: Identity, until?: number): AccessDecision =>
  until === undefined ? { outcome: 'pass', identity } : { outcome: 'pass', identity, until }

/** A decision's refusal: the allow policy's verdict as it is, `allowed: false` included. */
function refusal(refused: AllowRefusal): AllowRefusal {
  return Object.assign({ allowed: false }, refused)
}
const GROUPS_REFUSAL = refusal({ rule: 'groups', reason: 'none of the groups is one of allow.groups' })
/** An upstream that admits staff and admins, with an admin-only rule and, more specific, an open help rule. */
const RULES = {
  allow: { groups: ['staff', 'admins'] },
  rules: [
    { path: '/admin/help', allow: {} },
    { path: '/admin', allow: { groups: ['admins'] } },
  ],
}
const RULES_REVERSED = { ...RULES, rules: [...RULES.rules].reverse() }
const KEYCLOAK = claimMappingOf({ groupsClaim: 'realm_access.roles' })
const BY_EMAIL = claimMappingOf({ userClaim: 'email' })
const STEP_UP_RULE = { rules: [{ path: '/payroll', allow: { acr: ['mfa'], maxAuthAgeSeconds: 60 } }] }
const STEP_UP_REQUIREMENT = { acrValues: ['mfa'], maxAge: 60 }

interface Row {
  name: string
  upstream: Tree
  auth: AuthenticationResult
  path?: string
  preflight?: boolean
  authorization?: string
  expected: AccessDecision
  /** Whether the decision asked authentication (read the session or the Bearer token). */
  reads: boolean
}

const ROWS: Row[] = [
  // auth: none
  {
    name: 'auth: none passes anonymously and reads no session, even a signed-in one',
    upstream: { auth: 'none' },
    auth: ALICE,
    expected: ANONYMOUS,
    reads: false,
  },
  // auth: required (the default)
  { name: 'required, nobody signed in: unauthenticated, to sign in', upstream: {}, auth: undefined, expected: SIGN_IN, reads: true },
  {
    name: 'required, a sign-in whose access token could not be renewed: unauthenticated, expired',
    upstream: {},
    auth: 'expired',
    expected: EXPIRED,
    reads: true,
  },
  {
    name: 'required, a sign-in the refresh endpoint can renew: expired and refreshable',
    upstream: {},
    auth: 'refreshable',
    expected: { outcome: 'unauthenticated', expired: true, refreshable: true },
    reads: true,
  },
  { name: 'required, a refused Bearer token: unauthenticated as expired (invalid_token)', upstream: {}, auth: 'invalid_token', expected: EXPIRED, reads: true },
  { name: 'required, signed in: pass as that identity, without a deadline', upstream: {}, auth: ALICE, expected: pass(ALICE), reads: true },
  // auth: optional
  {
    name: 'optional, nobody signed in: pass anonymously (after reading the session)',
    upstream: { auth: 'optional' },
    auth: undefined,
    expected: ANONYMOUS,
    reads: true,
  },
  { name: 'optional, an expired sign-in: pass anonymously', upstream: { auth: 'optional' }, auth: 'expired', expected: ANONYMOUS, reads: true },
  { name: 'optional, a refreshable sign-in: pass anonymously', upstream: { auth: 'optional' }, auth: 'refreshable', expected: ANONYMOUS, reads: true },
  { name: 'optional, a refused Bearer token: pass anonymously', upstream: { auth: 'optional' }, auth: 'invalid_token', expected: ANONYMOUS, reads: true },
  { name: 'optional, signed in: pass as that identity', upstream: { auth: 'optional' }, auth: BOB, expected: pass(BOB), reads: true },
  {
    name: 'optional with an allow that names who: nobody signed in must sign in',
    upstream: { auth: 'optional', allow: { groups: ['admins'] } },
    auth: undefined,
    expected: SIGN_IN,
    reads: true,
  },
  {
    name: 'optional with an allow that asks only how (acr): an expired sign-in must sign in again',
    upstream: { auth: 'optional', allow: { acr: ['mfa'] } },
    auth: 'expired',
    expected: EXPIRED,
    reads: true,
  },
  {
    name: 'optional with a restricting rule: its path needs a sign-in',
    upstream: { auth: 'optional', rules: [{ path: '/admin', allow: { groups: ['admins'] } }] },
    auth: undefined,
    path: '/admin/x',
    expected: SIGN_IN,
    reads: true,
  },
  {
    name: 'optional with a restricting rule: outside its path anyone passes',
    upstream: { auth: 'optional', rules: [{ path: '/admin', allow: { groups: ['admins'] } }] },
    auth: undefined,
    path: '/page',
    expected: ANONYMOUS,
    reads: true,
  },
  // publicPaths
  {
    name: 'a public path passes anonymously without reading the session',
    upstream: { publicPaths: ['/public/**'] },
    auth: ALICE,
    path: '/public/x',
    expected: ANONYMOUS,
    reads: false,
  },
  {
    name: 'a public glob is no prefix: /publicity needs a sign-in',
    upstream: { publicPaths: ['/public/**'] },
    auth: undefined,
    path: '/publicity',
    expected: SIGN_IN,
    reads: true,
  },
  {
    name: "a public path inside a rule's path stays public",
    upstream: { publicPaths: ['/admin/status'], rules: [{ path: '/admin', allow: { groups: ['admins'] } }] },
    auth: BOB,
    path: '/admin/status',
    expected: ANONYMOUS,
    reads: false,
  },
  // CORS preflights
  {
    name: 'allowPreflight: a preflight passes without reading the session',
    upstream: { allowPreflight: true },
    auth: undefined,
    preflight: true,
    expected: ANONYMOUS,
    reads: false,
  },
  {
    name: 'allowPreflight: a preflight passes even where the allow rules would refuse',
    upstream: { allowPreflight: true, allow: { groups: ['admins'] } },
    auth: BOB,
    preflight: true,
    expected: ANONYMOUS,
    reads: false,
  },
  {
    name: 'allowPreflight: a request that is no preflight is decided as usual',
    upstream: { allowPreflight: true },
    auth: undefined,
    expected: SIGN_IN,
    reads: true,
  },
  { name: 'without allowPreflight a preflight needs a sign-in', upstream: {}, auth: undefined, preflight: true, expected: SIGN_IN, reads: true },
  // upstreams[].rules
  { name: "rules: a path no rule covers gets the upstream's allow", upstream: RULES, auth: BOB, path: '/page', expected: pass(BOB), reads: true },
  {
    name: "rules: the upstream's own allow refuses without a rulePath",
    upstream: RULES,
    auth: CAROL,
    path: '/page',
    expected: { outcome: 'forbidden', identity: CAROL, refusal: GROUPS_REFUSAL },
    reads: true,
  },
  {
    name: "rules: below a rule's path the rule refuses, its path reported",
    upstream: RULES,
    auth: BOB,
    path: '/admin/users',
    expected: { outcome: 'forbidden', identity: BOB, refusal: GROUPS_REFUSAL, rulePath: '/admin' },
    reads: true,
  },
  {
    name: "rules: the rule's path itself",
    upstream: RULES,
    auth: BOB,
    path: '/admin',
    expected: { outcome: 'forbidden', identity: BOB, refusal: GROUPS_REFUSAL, rulePath: '/admin' },
    reads: true,
  },
  { name: 'rules: the rule admits whom it names', upstream: RULES, auth: ALICE, path: '/admin/users', expected: pass(ALICE), reads: true },
  {
    name: 'rules: the most specific rule decides (/admin/help under /admin)',
    upstream: RULES,
    auth: BOB,
    path: '/admin/help/faq',
    expected: pass(BOB),
    reads: true,
  },
  {
    name: 'rules: the most specific rule decides whatever the order they are written in',
    upstream: RULES_REVERSED,
    auth: BOB,
    path: '/admin/help/faq',
    expected: pass(BOB),
    reads: true,
  },
  {
    name: "rules: a rule's allow replaces the upstream's (carol, refused by the upstream, passes the open help rule)",
    upstream: RULES,
    auth: CAROL,
    path: '/admin/help',
    expected: pass(CAROL),
    reads: true,
  },
  {
    name: "rules: a rule covers whole segments: /administration is the upstream's",
    upstream: RULES,
    auth: BOB,
    path: '/administration',
    expected: pass(BOB),
    reads: true,
  },
  // allow: emails, emailDomains, claims, groups under a mapping
  { name: 'allow.emails admits a listed address', upstream: { allow: { emails: ['alice@example.com'] } }, auth: ALICE, expected: pass(ALICE), reads: true },
  {
    name: 'allow.emails refuses another address',
    upstream: { allow: { emails: ['alice@example.com'] } },
    auth: BOB,
    expected: { outcome: 'forbidden', identity: BOB, refusal: refusal({ rule: 'emails', reason: 'the email is not one of allow.emails' }) },
    reads: true,
  },
  {
    name: 'allow.emailDomains refuses another domain',
    upstream: { allow: { emailDomains: ['corp.example'] } },
    auth: ALICE,
    expected: {
      outcome: 'forbidden',
      identity: ALICE,
      refusal: refusal({ rule: 'emailDomains', reason: 'the email domain is not one of allow.emailDomains' }),
    },
    reads: true,
  },
  {
    name: 'allow.claims admits a listed value',
    upstream: { allow: { claims: { tenant: ['acme'] } } },
    auth: identityOf({ sub: 'dave', tenant: 'acme' }),
    expected: pass(identityOf({ sub: 'dave', tenant: 'acme' })),
    reads: true,
  },
  {
    name: 'allow.claims refuses an identity without the claim and names it',
    upstream: { allow: { claims: { tenant: ['acme'] } } },
    auth: BOB,
    expected: {
      outcome: 'forbidden',
      identity: BOB,
      refusal: refusal({ rule: 'claims', reason: 'the session has no `tenant` claim: request the scope or mapper that adds it', missingClaim: 'tenant' }),
    },
    reads: true,
  },
  {
    name: "allow.groups under a provider's groupsClaim reads the mapped claim",
    upstream: { allow: { groups: ['admins'] } },
    auth: identityOf({ sub: 'erin', realm_access: { roles: ['admins'] } }, { mapping: KEYCLOAK }),
    expected: pass(identityOf({ sub: 'erin', realm_access: { roles: ['admins'] } }, { mapping: KEYCLOAK })),
    reads: true,
  },
  {
    name: "allow.groups under a provider's groupsClaim ignores that provider's own `groups`",
    upstream: { allow: { groups: ['admins'] } },
    auth: identityOf({ sub: 'erin', groups: ['admins'], realm_access: { roles: ['user'] } }, { mapping: KEYCLOAK }),
    expected: {
      outcome: 'forbidden',
      identity: identityOf({ sub: 'erin', groups: ['admins'], realm_access: { roles: ['user'] } }, { mapping: KEYCLOAK }),
      refusal: GROUPS_REFUSAL,
    },
    reads: true,
  },
  // providers[].userClaim
  {
    name: 'a provider that maps the user to `email`: a user without it is refused, with no allow rule at all',
    upstream: {},
    auth: identityOf({ sub: 'frank' }, { mapping: BY_EMAIL }),
    expected: {
      outcome: 'forbidden',
      identity: identityOf({ sub: 'frank' }, { mapping: BY_EMAIL }),
      refusal: refusal({ rule: 'userClaim', reason: 'the `email` claim (userClaim) is not a non-empty string or a number', missingClaim: 'email' }),
    },
    reads: true,
  },
  {
    name: "a provider that maps the user: a missing user on a rule's path reports the rule's path",
    upstream: RULES,
    auth: identityOf({ sub: 'frank', groups: ['admins'] }, { mapping: BY_EMAIL }),
    path: '/admin/x',
    expected: {
      outcome: 'forbidden',
      identity: identityOf({ sub: 'frank', groups: ['admins'] }, { mapping: BY_EMAIL }),
      refusal: refusal({ rule: 'userClaim', reason: 'the `email` claim (userClaim) is not a non-empty string or a number', missingClaim: 'email' }),
      rulePath: '/admin',
    },
    reads: true,
  },
  {
    name: 'a provider that maps the user: a user with it passes',
    upstream: {},
    auth: identityOf({ sub: 'frank', email: 'frank@example.com' }, { mapping: BY_EMAIL }),
    expected: pass(identityOf({ sub: 'frank', email: 'frank@example.com' }, { mapping: BY_EMAIL })),
    reads: true,
  },
  // Step-up (allow.acr, allow.maxAuthAgeSeconds), judged at NOW with the provider's tolerance.
  {
    name: 'step-up: another acr than asked is a step_up naming acr and the rule, not a Bearer',
    upstream: STEP_UP_RULE,
    auth: identityOf({ sub: 'gina', acr: 'pwd', auth_time: NOW }),
    path: '/payroll/slip',
    expected: {
      outcome: 'step_up',
      identity: identityOf({ sub: 'gina', acr: 'pwd', auth_time: NOW }),
      requirement: STEP_UP_REQUIREMENT,
      shortfall: 'acr',
      bearer: false,
      rulePath: '/payroll',
    },
    reads: true,
  },
  {
    name: "step-up: an auth_time older than maxAuthAgeSeconds, within the provider's tolerance: pass until auth_time + max age + tolerance",
    upstream: STEP_UP_RULE,
    auth: identityOf({ sub: 'gina', acr: 'mfa', auth_time: NOW - 90 }),
    path: '/payroll',
    expected: pass(identityOf({ sub: 'gina', acr: 'mfa', auth_time: NOW - 90 }), NOW * 1000),
    reads: true,
  },
  {
    name: 'step-up: one second past max age and tolerance: a step_up naming auth_time',
    upstream: STEP_UP_RULE,
    auth: identityOf({ sub: 'gina', acr: 'mfa', auth_time: NOW - 91 }),
    path: '/payroll',
    expected: {
      outcome: 'step_up',
      identity: identityOf({ sub: 'gina', acr: 'mfa', auth_time: NOW - 91 }),
      requirement: STEP_UP_REQUIREMENT,
      shortfall: 'auth_time',
      bearer: false,
      rulePath: '/payroll',
    },
    reads: true,
  },
  {
    name: "step-up: the tolerance is the identity's provider's (partner: none)",
    upstream: STEP_UP_RULE,
    auth: identityOf({ sub: 'gina', acr: 'mfa', auth_time: NOW - 61 }, { provider: 'partner' }),
    path: '/payroll',
    expected: {
      outcome: 'step_up',
      identity: identityOf({ sub: 'gina', acr: 'mfa', auth_time: NOW - 61 }, { provider: 'partner' }),
      requirement: STEP_UP_REQUIREMENT,
      shortfall: 'auth_time',
      bearer: false,
      rulePath: '/payroll',
    },
    reads: true,
  },
  {
    name: 'step-up: without tolerance, exactly max age passes until auth_time + max age',
    upstream: STEP_UP_RULE,
    auth: identityOf({ sub: 'gina', acr: 'mfa', auth_time: NOW - 60 }, { provider: 'partner' }),
    path: '/payroll',
    expected: pass(identityOf({ sub: 'gina', acr: 'mfa', auth_time: NOW - 60 }, { provider: 'partner' }), NOW * 1000),
    reads: true,
  },
  {
    name: 'step-up: an acr-only allow passes without a deadline',
    upstream: { allow: { acr: ['mfa'] } },
    auth: identityOf({ sub: 'gina', acr: 'mfa' }),
    expected: pass(identityOf({ sub: 'gina', acr: 'mfa' })),
    reads: true,
  },
  {
    name: "step-up: the upstream's own allow asks it, so no rulePath",
    upstream: { allow: { acr: ['mfa'] } },
    auth: identityOf({ sub: 'gina', acr: 'pwd' }),
    expected: { outcome: 'step_up', identity: identityOf({ sub: 'gina', acr: 'pwd' }), requirement: { acrValues: ['mfa'] }, shortfall: 'acr', bearer: false },
    reads: true,
  },
  {
    name: "step-up: the identity is the request's own Bearer token (a sign-in cannot upgrade it)",
    upstream: { allow: { acr: ['mfa'] } },
    auth: identityOf({ sub: 'gina', acr: 'pwd' }),
    authorization: 'Bearer at-gina',
    expected: { outcome: 'step_up', identity: identityOf({ sub: 'gina', acr: 'pwd' }), requirement: { acrValues: ['mfa'] }, shortfall: 'acr', bearer: true },
    reads: true,
  },
  {
    name: 'step-up: the Bearer scheme is read case-insensitively',
    upstream: { allow: { acr: ['mfa'] } },
    auth: identityOf({ sub: 'gina', acr: 'pwd' }),
    authorization: 'bearer at-gina',
    expected: { outcome: 'step_up', identity: identityOf({ sub: 'gina', acr: 'pwd' }), requirement: { acrValues: ['mfa'] }, shortfall: 'acr', bearer: true },
    reads: true,
  },
  {
    name: "step-up: another token in Authorization is not the identity's (a session signed in)",
    upstream: { allow: { acr: ['mfa'] } },
    auth: identityOf({ sub: 'gina', acr: 'pwd' }),
    authorization: 'Bearer someone-else',
    expected: { outcome: 'step_up', identity: identityOf({ sub: 'gina', acr: 'pwd' }), requirement: { acrValues: ['mfa'] }, shortfall: 'acr', bearer: false },
    reads: true,
  },
  {
    name: 'step-up: Basic credentials are no Bearer token',
    upstream: { allow: { acr: ['mfa'] } },
    auth: identityOf({ sub: 'gina', acr: 'pwd' }),
    authorization: 'Basic at-gina',
    expected: { outcome: 'step_up', identity: identityOf({ sub: 'gina', acr: 'pwd' }), requirement: { acrValues: ['mfa'] }, shortfall: 'acr', bearer: false },
    reads: true,
  },
]

t.test('UpstreamAccess.decide, row by row', async (t) => {
  for (const row of ROWS) {
    const { access, asked } = accessOf(upstreamOf(row.upstream), row.auth)
    const path = row.path ?? '/page'
    const request: AccessRequest = { path, preflight: row.preflight ?? false, host: 'app.example.com' }
    const decision = await access.decide(requestOf(path, row.authorization), reply, request)
    t.strictSame(decision, row.expected, row.name)
    t.strictSame(asked.hosts, row.reads ? ['app.example.com'] : [], `${row.name}: ${row.reads ? 'authenticates once, for the host asked' : 'reads nothing'}`)
  }
})

t.test("step-up is judged by the judge's clock at the time of each decision", async (t) => {
  let now = NOW
  const judge: StepUpJudge = { nowSeconds: () => now, toleranceSeconds: () => 0 }
  const gina = identityOf({ sub: 'gina', acr: 'mfa', auth_time: NOW })
  const { access } = accessOf(upstreamOf(STEP_UP_RULE), gina, judge)
  const ask = () => access.decide(requestOf('/payroll'), reply, { path: '/payroll', preflight: false })
  t.strictSame(await ask(), pass(gina, (NOW + 60) * 1000), 'just signed in: pass until the age runs out')
  now = NOW + 60
  t.match(await ask(), { outcome: 'pass' }, 'at max age: still passes')
  now = NOW + 61
  t.match(await ask(), { outcome: 'step_up', shortfall: 'auth_time' }, 'a second later, the same sign-in must step up')
})

t.test('isPreflight: OPTIONS with Origin and Access-Control-Request-Method (Fetch: CORS-preflight request), and nothing else', async (t) => {
  const origin = 'https://spa.example.com'
  const rows: Array<[string, string, Record<string, string>, boolean]> = [
    ['a CORS preflight', 'OPTIONS', { origin, 'access-control-request-method': 'PUT' }, true],
    ['a plain OPTIONS', 'OPTIONS', {}, false],
    ['without Origin: no CORS request', 'OPTIONS', { 'access-control-request-method': 'PUT' }, false],
    ['an empty Origin', 'OPTIONS', { origin: '', 'access-control-request-method': 'PUT' }, false],
    ['an empty Access-Control-Request-Method', 'OPTIONS', { origin, 'access-control-request-method': '' }, false],
    ['a blank Access-Control-Request-Method', 'OPTIONS', { origin, 'access-control-request-method': ' ' }, false],
    ['Origin alone', 'OPTIONS', { origin }, false],
    ['a GET naming a method', 'GET', { origin, 'access-control-request-method': 'PUT' }, false],
    ['methods are case-sensitive (RFC 9110 9.1)', 'options', { origin, 'access-control-request-method': 'PUT' }, false],
  ]
  for (const [name, method, headers, expected] of rows) t.equal(isPreflight(method, headers), expected, name)
})

t.test('optionalSignIn: only auth: optional, only where the allow names nothing', async (t) => {
  t.equal(optionalSignIn({ auth: 'optional' }, { needsSignIn: false }), true, 'optional, an allow that names nothing')
  t.equal(optionalSignIn({ auth: 'optional' }, { needsSignIn: true }), false, 'optional, an allow that names who or how')
  t.equal(optionalSignIn({ auth: 'required' }, { needsSignIn: false }), false, 'required')
  t.equal(optionalSignIn({ auth: 'none' }, { needsSignIn: false }), false, 'none (decided before authentication)')
})

t.test('offersSignIn: not where tokenAudience: resource signs no session in', async (t) => {
  t.equal(offersSignIn({ tokenAudience: 'resource' }), false)
  t.equal(offersSignIn({ tokenAudience: 'provider' }), true)
  t.equal(offersSignIn({}), true, "absent: the provider's audiences")
})

// Two providers: an upstream that accepts `staff` alone.
const STAFF = { name: 'staff', issuer: 'https://login.example.com/realms/staff', clientId: 'gateway', clientSecret: CLIENT_SECRET }
const PARTNERS = { name: 'partners', issuer: 'https://partners.example.net', clientId: 'gw', clientSecret: CLIENT_SECRET }

function staffUpstream(patch: Tree): UpstreamConfig {
  return resolve({ provider: undefined, providers: [STAFF, PARTNERS], ...withUpstream({ providers: ['staff'], ...patch }) }).upstreams[0]!
}

t.test("decideFor: an open WebSocket's identity, decided without reading or writing anything", async (t) => {
  const staffer = identityOf({ sub: 'alice', groups: ['admins'] }, { provider: 'staff' })
  const partner = identityOf({ sub: 'alice', groups: ['admins'] }, { provider: 'partners' })
  const neverAsked = {
    authenticate: async (): Promise<AuthenticationResult> => {
      throw new Error('decideFor must not authenticate')
    },
  }
  const rows: Array<[string, Tree, Identity | undefined, string, AccessDecision]> = [
    ['an identity of a provider the upstream accepts: pass', {}, staffer, '/page', pass(staffer)],
    ['an identity of another provider signs nobody in (as authenticate.ts)', {}, partner, '/page', SIGN_IN],
    ['nobody: unauthenticated, never expired', {}, undefined, '/page', SIGN_IN],
    ["another provider's identity on an optional upstream: anonymous, not as that identity", { auth: 'optional' }, partner, '/page', ANONYMOUS],
    ['a public path: anonymous, whoever it is', { publicPaths: ['/public/**'] }, staffer, '/public/x', ANONYMOUS],
    [
      'the allow rules apply as to decide',
      { allow: { groups: ['staff'] } },
      staffer,
      '/page',
      { outcome: 'forbidden', identity: staffer, refusal: refusal({ rule: 'groups', reason: 'none of the groups is one of allow.groups' }) },
    ],
  ]
  for (const [name, patch, identity, path, expected] of rows) {
    const access = new UpstreamAccess(staffUpstream(patch), neverAsked, JUDGE)
    t.strictSame(access.decideFor(identity, requestOf(path), { path, preflight: false }), expected, name)
  }
})

t.test('AccessDecisions: one UpstreamAccess per upstream, with its providers and its resource audience', async (t) => {
  const config = resolve({
    upstreams: [
      { name: 'app', target: 'http://127.0.0.1:3000' },
      { name: 'mcp', match: { pathPrefix: '/mcp' }, target: 'http://127.0.0.1:3001', tokenAudience: 'resource' },
      { name: 'tools', match: { pathPrefix: '/tools', hosts: ['tools.example.com'] }, target: 'http://127.0.0.1:3002', tokenAudience: 'resource' },
    ],
  })
  const [app, mcp, tools] = config.upstreams as [UpstreamConfig, UpstreamConfig, UpstreamConfig]
  const built: Array<{ providers: readonly string[]; audience: ((host: string | undefined) => string) | undefined; hosts: Array<string | undefined> }> = []
  const authentication: Pick<Authentication, 'forProviders'> = {
    forProviders: (providers, audience) => {
      const entry = { providers, audience, hosts: [] as Array<string | undefined> }
      built.push(entry)
      return {
        authenticate: async (_req, _reply, host) => {
          entry.hosts.push(host)
          return undefined
        },
      }
    },
  }

  t.throws(
    () => new AccessDecisions(config.upstreams, authentication),
    { message: 'the upstream mcp has tokenAudience: resource, whose audience is on server.publicUrl, and none was given' },
    'tokenAudience: resource without publicUrl: refused, never let through without an audience',
  )
  built.length = 0
  const decisions = new AccessDecisions(config.upstreams, authentication, JUDGE, config.server.publicUrl)
  t.strictSame(
    built.map((b) => b.providers),
    [['default'], ['default'], ['default']],
    "each upstream's providers",
  )
  t.equal(built[0]?.audience, undefined, "the app takes its providers' audiences")
  t.equal(built[1]?.audience?.(undefined), 'https://app.example.com/mcp', 'the MCP upstream: its resource identifier on the public origin')
  t.equal(built[2]?.audience?.('tools.example.com'), 'https://tools.example.com/tools', 'an upstream with hosts: on the host asked, with the public scheme')
  t.not(decisions.of(app), decisions.of(mcp), 'one UpstreamAccess each')
  t.equal(decisions.of(tools), decisions.of(tools), 'built once')
  await decisions.of(tools).decide(requestOf('/tools/x'), reply, { path: '/tools/x', preflight: false, host: 'tools.example.com' })
  t.strictSame(built[2]?.hosts, ['tools.example.com'], 'the host asked reaches authentication, which checks the audience on it')
  t.throws(
    () => decisions.of({ ...app }),
    { message: "the upstream app is not one of this configuration's" },
    "a copy of an upstream is not this configuration's",
  )
})

t.test('the error builders: status, code, WWW-Authenticate exactly, extensions', async (t) => {
  const signInUrl = 'https://app.example.com/api/v1/openid/redirect?redirectAfter=%2Fx'
  const metadata = 'https://app.example.com/.well-known/oauth-protected-resource/mcp'
  const rows: Array<[string, GatewayError, number, string, Record<string, string>, Record<string, unknown>]> = [
    [
      'unauthenticated, nobody signed in: a bare Bearer challenge (RFC 6750 3.1)',
      unauthenticatedError(false, signInUrl),
      401,
      'unauthenticated',
      { 'www-authenticate': 'Bearer' },
      { signInUrl },
    ],
    [
      'unauthenticated, expired or refused: error="invalid_token"',
      unauthenticatedError(true, signInUrl),
      401,
      'unauthenticated',
      { 'www-authenticate': 'Bearer error="invalid_token"' },
      { signInUrl },
    ],
    [
      'unauthenticated with resource metadata (RFC 9728 5.1): after the error',
      unauthenticatedError(true, signInUrl, { resource_metadata: metadata, scope: 'mcp:tools' }),
      401,
      'unauthenticated',
      { 'www-authenticate': `Bearer error="invalid_token", resource_metadata="${metadata}", scope="mcp:tools"` },
      { signInUrl },
    ],
    [
      'unauthenticated with resource metadata, nobody signed in: no error parameter',
      unauthenticatedError(false, signInUrl, { resource_metadata: metadata }),
      401,
      'unauthenticated',
      { 'www-authenticate': `Bearer resource_metadata="${metadata}"` },
      { signInUrl },
    ],
    [
      'step-up for an acr (RFC 9470 3): acr_values, no max_age',
      stepUpError({ acrValues: ['mfa'] }, signInUrl),
      401,
      'insufficient_user_authentication',
      {
        'www-authenticate':
          'Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="mfa"',
      },
      { signInUrl, acr_values: 'mfa' },
    ],
    [
      'step-up for a max age, with resource metadata after it',
      stepUpError({ maxAge: 300 }, signInUrl, { resource_metadata: metadata }),
      401,
      'insufficient_user_authentication',
      {
        'www-authenticate': `Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", max_age="300", resource_metadata="${metadata}"`,
      },
      { signInUrl, max_age: 300 },
    ],
    ['forbidden by the upstream allow: no headers, no extension', forbiddenError(), 403, 'forbidden', {}, {}],
    ["forbidden by a rule: the rule's path as refusedPath", forbiddenError('/admin'), 403, 'forbidden', {}, { refusedPath: '/admin' }],
  ]
  for (const [name, error, status, code, headers, extensions] of rows) {
    t.equal(error.status, status, `${name}: status`)
    t.equal(error.code, code, `${name}: code`)
    t.strictSame(error.headers, headers, `${name}: headers`)
    t.strictSame(error.extensions, extensions, `${name}: extensions`)
    t.match(error.toProblem(), { ...extensions, status, code, type: `urn:openid-gateway:problem:${code}` }, `${name}: the problem`)
  }
  t.equal(unauthenticatedError(false, signInUrl).message, 'sign in first')
  t.equal(unauthenticatedError(true, signInUrl).message, 'the sign-in has expired, or the Bearer token was refused')
  t.equal(forbiddenError().message, 'your account is not allowed to use this application')
  t.equal(forbiddenError('/admin').message, 'your account is not allowed to use /admin of this application', 'the detail names the part refused')
})

t.test('signInLocation: the redirect endpoint on the public origin, back to the request when it may be', async (t) => {
  const deps = {
    publicUrl: 'https://gw.example.com',
    validateRedirectAfter: createRedirectAfterValidator({ publicUrl: 'https://gw.example.com', allowedHosts: ['app.example.com'] }),
  }
  const at = (host: string, target: string) => ({ scheme: 'https', host, target })
  const enc = encodeURIComponent
  const rows: Array<[string, { scheme: string; host: string; target: string }, boolean, string]> = [
    [
      'an allowed host: back to the whole URL',
      at('app.example.com', '/page?x=1'),
      false,
      `/api/v1/openid/redirect?redirectAfter=${enc('https://app.example.com/page?x=1')}`,
    ],
    [
      'the public host: back to the whole URL',
      at('gw.example.com', '/page'),
      false,
      `/api/v1/openid/redirect?redirectAfter=${enc('https://gw.example.com/page')}`,
    ],
    [
      'a host redirects may not go to: back to the path alone',
      at('evil.example.com', '/deep/page?x=1'),
      false,
      `/api/v1/openid/redirect?redirectAfter=${enc('/deep/page?x=1')}`,
    ],
    ['neither the URL nor the path may be gone back to: no redirectAfter', at('evil.example.com', '/a//b'), false, '/api/v1/openid/redirect'],
    [
      'refreshable: the refresh endpoint, back to the whole URL',
      at('app.example.com', '/page'),
      true,
      `/api/v1/openid/refresh?redirectAfter=${enc('https://app.example.com/page')}`,
    ],
    [
      'refreshable, a host redirects may not go to: back to the path',
      at('evil.example.com', '/page'),
      true,
      `/api/v1/openid/refresh?redirectAfter=${enc('/page')}`,
    ],
    ['refreshable, nothing to go back to: back to /', at('evil.example.com', '/a//b'), true, `/api/v1/openid/refresh?redirectAfter=${enc('/')}`],
  ]
  for (const [name, request, refreshable, path] of rows) t.equal(signInLocation(deps, request, refreshable), `https://gw.example.com${path}`, name)
})

t.test('logForbidden: who, where, which rule and why, and a missing claim warned once per upstream and claim', async (t) => {
  const { log, lines } = recordedLog()
  const upstream = upstreamOf({ name: 'ops', allow: { claims: { tenant: ['acme'] } } })
  const refused = (identity: Identity, rulePath?: string): Extract<AccessDecision, { outcome: 'forbidden' }> => {
    const refusal = { rule: 'claims' as const, reason: 'the session has no `tenant` claim: request the scope or mapper that adds it', missingClaim: 'tenant' }
    return rulePath === undefined ? { outcome: 'forbidden', identity, refusal } : { outcome: 'forbidden', identity, refusal, rulePath }
  }
  logForbidden({ log }, upstream, refused(BOB), { method: 'GET' })
  logForbidden({ log }, upstream, refused(CAROL, '/admin'))
  t.strictSame(
    lines.map(({ level, msg, sub, upstream, path, rule, reason, method, claim }) => ({ level, msg, sub, upstream, path, rule, reason, method, claim })),
    [
      {
        level: 30,
        msg: 'access refused by the allow rules',
        sub: 'bob',
        upstream: 'ops',
        path: undefined,
        rule: 'claims',
        reason: 'the session has no `tenant` claim: request the scope or mapper that adds it',
        method: 'GET',
        claim: undefined,
      },
      {
        level: 40,
        msg: 'an allow rule needs the `tenant` claim and a session does not carry it: request the scope or mapper that adds it',
        sub: undefined,
        upstream: 'ops',
        path: undefined,
        rule: 'claims',
        reason: undefined,
        method: undefined,
        claim: 'tenant',
      },
      {
        level: 30,
        msg: 'access refused by the allow rules',
        sub: 'carol',
        upstream: 'ops',
        path: '/admin',
        rule: 'claims',
        reason: 'the session has no `tenant` claim: request the scope or mapper that adds it',
        method: undefined,
        claim: undefined,
      },
    ],
    'the first refusal for a missing claim warns; the next does not',
  )
  logForbidden({ log }, upstreamOf({ name: 'ops', allow: { claims: { tenant: ['acme'] } } }), refused(BOB))
  t.equal(lines.filter((l) => l.level === 40).length, 2, "another configuration's upstream warns again")
  t.notMatch(JSON.stringify(lines), /example\.com/, 'no claim value in any line')
})

t.test('logStepUp: who, where and what fell short, never a claim value', async (t) => {
  const { log, lines } = recordedLog()
  const upstream = upstreamOf({ name: 'payroll' })
  const gina = identityOf({ sub: 'gina', acr: 'pwd-secret-level', auth_time: NOW })
  logStepUp(
    { log },
    upstream,
    { outcome: 'step_up', identity: gina, requirement: STEP_UP_REQUIREMENT, shortfall: 'acr', bearer: true, rulePath: '/payroll' },
    { method: 'POST' },
  )
  logStepUp({ log }, upstream, { outcome: 'step_up', identity: gina, requirement: STEP_UP_REQUIREMENT, shortfall: 'auth_time', bearer: false })
  t.match(lines, [
    { level: 30, msg: 'step-up authentication required', sub: 'gina', upstream: 'payroll', path: '/payroll', shortfall: 'acr', bearer: true, method: 'POST' },
    { level: 30, msg: 'step-up authentication required', sub: 'gina', upstream: 'payroll', shortfall: 'auth_time', bearer: false },
  ])
  t.notOk('path' in (lines[1] ?? {}), "the upstream's own allow: no path")
  t.notMatch(JSON.stringify(lines), /pwd-secret-level/, 'no claim value')
})
