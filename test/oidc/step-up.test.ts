import t from 'tap'
import pino from 'pino'
import type { FastifyBaseLogger } from 'fastify'
import { EARLIEST_AUTH_TIME, stepUpParameters, stepUpRequirementOf, stepUpShortfall } from '#src/oidc/step-up'
import { UpstreamAccess, stepUpError, type StepUpJudge } from '#src/access/decision'
import type { Identity } from '#src/contract/identity'
import type { UpstreamConfig } from '#src/options/types'
import { resolve, withUpstream } from '../fixtures/config/base.ts'
import { DEFAULT_CLAIM_MAPPING } from '#src/contract/claim-path'

// The step-up verdict (oidc/step-up.ts), shared by the access decision and the callback, and the
// decision's step_up outcome (access/decision.ts). The end-to-end flows are test/e2e/step-up.test.ts.

const NOW = 1_800_000_000

t.test('stepUpRequirementOf: none without the keys, so the decision tests one property', async (t) => {
  t.equal(stepUpRequirementOf({}), undefined)
  t.equal(stepUpRequirementOf({ acr: [] }), undefined, 'an empty list restricts nothing (as the other kinds)')
  t.same(stepUpRequirementOf({ acr: ['mfa', 'hwk'] }), { acrValues: ['mfa', 'hwk'] })
  t.same(stepUpRequirementOf({ maxAuthAgeSeconds: 60 }), { maxAge: 60 })
  t.same(stepUpParameters({ acrValues: ['mfa', 'hwk'], maxAge: 60 }), { acr_values: 'mfa hwk', max_age: '60' }, 'acr_values in the order written')
})

t.test('stepUpShortfall: acr exactly one of the accepted, auth_time within max age and tolerance', async (t) => {
  const acr = { acrValues: ['mfa', 'hwk'] }
  t.equal(stepUpShortfall({ acr: 'mfa' }, acr, NOW, 0), undefined)
  t.equal(stepUpShortfall({ acr: 'hwk' }, acr, NOW, 0), undefined)
  t.equal(stepUpShortfall({ acr: 'pwd' }, acr, NOW, 0), 'acr', 'a value not listed')
  t.equal(stepUpShortfall({ acr: 'MFA' }, acr, NOW, 0), 'acr', 'compared exactly')
  t.equal(stepUpShortfall({}, acr, NOW, 0), 'acr', 'no acr (a session sealed before step-up)')
  t.equal(stepUpShortfall({ acr: ['mfa'] }, acr, NOW, 0), 'acr', 'not a string')
  t.equal(stepUpShortfall(Object.create({ acr: 'mfa' }) as Record<string, unknown>, acr, NOW, 0), 'acr', 'own claims only')
  const age = { maxAge: 60 }
  t.equal(stepUpShortfall({ auth_time: NOW - 60 }, age, NOW, 0), undefined, 'exactly max age')
  t.equal(stepUpShortfall({ auth_time: NOW - 61 }, age, NOW, 0), 'auth_time', 'older')
  t.equal(stepUpShortfall({ auth_time: NOW - 90 }, age, NOW, 30), undefined, 'within the clock tolerance')
  t.equal(stepUpShortfall({ auth_time: NOW - 91 }, age, NOW, 30), 'auth_time')
  t.equal(stepUpShortfall({}, age, NOW, 30), 'auth_time', 'no auth_time: not known to be recent')
  t.equal(stepUpShortfall({ auth_time: String(NOW) }, age, NOW, 30), 'auth_time', 'not a number')
  // An implausible auth_time is unknown, never a sign-in in 1970 nor one still to come.
  t.equal(stepUpShortfall({ auth_time: 0 }, age, NOW, 30), 'auth_time', 'auth_time 0 (Glewlwyd 2.7): unknown, step up')
  t.equal(
    stepUpShortfall({ auth_time: EARLIEST_AUTH_TIME - 1 }, { maxAge: NOW }, NOW, 30),
    'auth_time',
    'before 2000, even under a max age that reaches back to it',
  )
  t.equal(stepUpShortfall({ auth_time: NOW + 31 }, age, NOW, 30), 'auth_time', 'in the future beyond the tolerance: not younger than any max age')
  t.equal(stepUpShortfall({ auth_time: NOW + 30 }, age, NOW, 30), undefined, 'in the future within the tolerance')
  t.equal(stepUpShortfall({ auth_time: NOW - 1.5 }, age, NOW, 30), 'auth_time', 'not an integer')
  t.equal(stepUpShortfall({ acr: 'mfa', auth_time: NOW - 600 }, { ...acr, ...age }, NOW, 0), 'auth_time', 'both asked: both must pass')
})

t.test('stepUpError: the RFC 9470 challenge and problem', async (t) => {
  const err = stepUpError({ acrValues: ['mfa', 'hwk'], maxAge: 300 }, 'https://gw/api/v1/openid/redirect?redirectAfter=%2Fx')
  t.equal(err.status, 401)
  t.equal(err.code, 'insufficient_user_authentication')
  t.equal(
    err.headers['www-authenticate'],
    'Bearer error="insufficient_user_authentication", error_description="A different authentication level is required", acr_values="mfa hwk", max_age="300"',
  )
  t.match(err.toProblem(), { acr_values: 'mfa hwk', max_age: 300, signInUrl: 'https://gw/api/v1/openid/redirect?redirectAfter=%2Fx' })
})

const log: FastifyBaseLogger = pino({ level: 'silent' })
const identity = (claims: Record<string, unknown>): Identity => ({
  claims: { sub: 'alice', ...claims },
  accessToken: 'at',
  provider: 'default',
  issuer: 'https://idp',
  mapping: DEFAULT_CLAIM_MAPPING,
})
const judge: StepUpJudge = { nowSeconds: () => NOW, toleranceSeconds: () => 30 }

function decider(upstream: UpstreamConfig, who: Identity) {
  return new UpstreamAccess(upstream, { authenticate: async () => who }, judge)
}

t.test('the access decision: step_up after the other kinds, pass with the max age as its deadline', async (t) => {
  const config = resolve(
    withUpstream({ allow: { groups: ['finance'] }, rules: [{ path: '/payroll', allow: { groups: ['finance'], acr: ['mfa'], maxAuthAgeSeconds: 60 } }] }),
  )
  const upstream = config.upstreams[0] as UpstreamConfig
  const req = (authorization?: string) => ({ url: '/payroll', cookies: {}, headers: authorization === undefined ? {} : { authorization }, log })
  const ask = (who: Identity, authorization?: string) =>
    decider(upstream, who).decide(req(authorization), { setCookie: () => undefined }, { path: '/payroll/slip', preflight: false })

  t.match(await ask(identity({ groups: ['staff'], acr: 'pwd' })), { outcome: 'forbidden' }, 'who the user is is decided first: 403')
  t.match(await ask(identity({ groups: ['finance'], acr: 'pwd', auth_time: NOW })), {
    outcome: 'step_up',
    shortfall: 'acr',
    bearer: false,
    rulePath: '/payroll',
    requirement: { acrValues: ['mfa'], maxAge: 60 },
  })
  t.match(await ask(identity({ groups: ['finance'], acr: 'mfa', auth_time: NOW - 100 })), { outcome: 'step_up', shortfall: 'auth_time' })
  t.match(
    await ask(identity({ groups: ['finance'], acr: 'pwd' }), 'Bearer at'),
    { outcome: 'step_up', bearer: true },
    'the identity is the Bearer token of the request',
  )
  t.same(await ask(identity({ groups: ['finance'], acr: 'mfa', auth_time: NOW - 10 })), {
    outcome: 'pass',
    identity: identity({ groups: ['finance'], acr: 'mfa', auth_time: NOW - 10 }),
    until: (NOW - 10 + 60 + 30) * 1000,
  })
  const outside = await decider(upstream, identity({ groups: ['finance'] })).decide(req(), { setCookie: () => undefined }, { path: '/other', preflight: false })
  t.same(outside, { outcome: 'pass', identity: identity({ groups: ['finance'] }) }, 'no step-up rule: a plain pass')
})
