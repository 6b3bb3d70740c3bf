import t from 'tap'
import type { IncomingHttpHeaders } from 'node:http'
import type { CheckedRequest } from '#src/access/checker'
import type { DecisionRequest } from '#src/access/decision'
import type { Answer } from '#src/access/answer'
import type { UpstreamConfig } from '#src/options/types'

import {
  createCheckPipeline,
  statusOf,
  type CheckCall,
  type CheckOutcome,
  type CheckTransport,
  type EnvoyDecide,
  type EnvoyDecision,
} from '#src/checks/pipeline'
import { GatewayError, type Problem } from '#src/contract/errors'
import type { Identity } from '#src/contract/identity'
import { createErrorPage, createProblemAnswer } from '#src/pages/error-page'
import { createRedirectAfterValidator } from '#src/routes/redirect-after'
import { CookieCipher } from '#src/session/cipher'
import { GatewayCookies } from '#src/session/cookies'
import { MemorySessionStore } from '#src/session/memory-store'
import type { SessionReply, SessionRequest } from '#src/session/types'
import { manualClock } from '../fixtures/clock.ts'
import { COOKIE_SECRET } from '../fixtures/config/base.ts'
import { identityOf, recordedLog } from '../fixtures/decision-inputs.ts'

/** The upstream the stub decisions name (only its name is read, by nobody here). */
const UPSTREAM = { name: 'admin' } as UpstreamConfig

// The check pipeline (checks/pipeline.ts) that both Envoy transports adapt, without a transport:
// a toy transport that describes what it is given and hands back what it is asked to write, a stub
// decision (the Checker's is test/access/checker.test.ts), and the real refusal renderer
// (pages/error-page.ts) over a real, empty memory session store. Each step between "described"
// and "answered" is observed here: the 400 of a request that cannot be described, the check's
// DecisionRequest, former cookies expired before the decision, who a refusal names, and the
// status each outcome is recorded with.

const PUBLIC_URL = 'https://app.example.com'
const ALICE = identityOf({ sub: 'alice', groups: ['admins'] })
const BOB = identityOf({ sub: 'bob', email: 'bob@example.com', groups: ['staff'] })
const CHECKED: CheckedRequest = { method: 'GET', host: 'app.example.com', scheme: 'https', target: { path: '/admin/users', search: '?page=2' } }
const NAVIGATION = { accept: 'text/html,application/xhtml+xml', 'sec-fetch-mode': 'navigate' }
const JSON_ACCEPT = { accept: 'application/json' }

/** What the toy transport was given to write. */
interface Written {
  outcome: CheckOutcome
  logged: Record<string, unknown>
  /** `call.identity` when the answer was written. */
  identity: Identity | null
  reply: SessionReply
}

/** The toy transport's source: the request it describes, or what describing it throws. */
type Source = CheckedRequest | Error

/** Every step the pipeline took, in order. */
type Step = 'expireFormer' | 'decide'

function toyTransport(steps: Step[], expired: SessionRequest[]): CheckTransport<Source, CheckCall, SessionReply, Written> {
  return {
    describe(source) {
      if (source instanceof Error) throw source
      return source
    },
    answer: (outcome, logged, call, reply) => ({ outcome, logged, identity: call.identity, reply }),
    expireFormer(req) {
      steps.push('expireFormer')
      expired.push(req)
    },
  }
}

interface Harness {
  run(source: Source, call: CheckCall, upstreamName?: string): Promise<Written>
  /** What decide was asked, in order. */
  decided: Array<{ req: DecisionRequest; reply: SessionReply; checked: CheckedRequest; upstreamName: string | undefined }>
  steps: Step[]
  expired: SessionRequest[]
  reply: SessionReply
}

/** A pipeline whose decision is `decision` (or throws it), with the real problem answer. */
function harness(t: Tap, decision: EnvoyDecision | Error): Harness {
  const clock = manualClock()
  const cookies = new GatewayCookies(
    { name: 'ogw', secrets: [COOKIE_SECRET], secure: true, sameSite: 'lax', credentialsPath: '/' },
    new CookieCipher([COOKIE_SECRET], clock),
  )
  const store = new MemorySessionStore(cookies, 3600, { maxSessions: 10, maxSessionsPerUser: 10 }, clock)
  t.teardown(() => store.close())
  const answerProblem = createProblemAnswer(
    createErrorPage({
      publicUrl: PUBLIC_URL,
      store,
      validateRedirectAfter: createRedirectAfterValidator({ publicUrl: PUBLIC_URL, allowedHosts: [] }),
      endSessionUrls: () => [],
    }),
  )
  const decided: Harness['decided'] = []
  const steps: Step[] = []
  const expired: SessionRequest[] = []
  const decide: EnvoyDecide = async (req, reply, checked, upstreamName) => {
    steps.push('decide')
    decided.push({ req, reply, checked, upstreamName })
    if (decision instanceof Error) throw decision
    return decision
  }
  const pipeline = createCheckPipeline({ decide, answerProblem })
  const transport = toyTransport(steps, expired)
  const reply: SessionReply = { setCookie: () => undefined }
  return { run: (source, call, upstreamName) => pipeline.run(transport, source, call, reply, upstreamName), decided, steps, expired, reply }
}

type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

/** A check call as a transport builds one: the client's cookies and headers, nobody decided yet. */
function callOf(headers: IncomingHttpHeaders = JSON_ACCEPT, method = 'GET'): CheckCall {
  return {
    url: '/api/v1/openid/ext-authz/admin/users?page=2',
    cookies: { ogw: 'sealed', app: '1' },
    method,
    headers,
    log: recordedLog().log,
    identity: null,
    id: 'req-1',
  }
}

function refused(error: GatewayError, identity?: Identity | null): EnvoyDecision {
  const answer: Answer = { kind: 'refuse', outcome: error.code, upstream: UPSTREAM, identity: identity ?? null, error }
  return { answer, logged: { outcome: error.code, upstream: 'admin' } }
}

function problemOf(written: Written): Problem {
  if (written.outcome.kind !== 'refused') throw new Error(`not refused: ${written.outcome.kind}`)
  return JSON.parse(written.outcome.answer.body) as Problem
}

t.test('a request the transport cannot describe: refused with its problem, nothing decided', async (t) => {
  const rows: Array<[string, GatewayError, number, Record<string, string>]> = [
    ['a malformed check', new GatewayError('bad_request', 'the request has no :path'), 400, {}],
    ['no upstream for it', new GatewayError('not_found', 'no upstream serves this host and path'), 404, {}],
    [
      'a method the check does not take, with its Allow',
      new GatewayError('method_not_allowed', 'GET only', { headers: { allow: 'GET, HEAD' } }),
      405,
      { allow: 'GET, HEAD' },
    ],
  ]
  for (const [name, error, status, headers] of rows) {
    const h = harness(t, new Error('decide must not be called'))
    const written = await h.run(error, callOf())
    t.match(
      written.outcome,
      { kind: 'refused', code: error.code, answer: { status, headers: { ...headers, 'content-type': /^application\/problem\+json/ } } },
      `${name}: ${status}`,
    )
    t.match(problemOf(written), { status, code: error.code, detail: error.message }, `${name}: the problem`)
    t.strictSame(written.logged, { outcome: error.code, reason: error.message }, `${name}: the request line says why`)
    t.equal(written.identity, null, `${name}: nobody decided`)
    t.strictSame(h.steps, [], `${name}: neither former cookies expired nor a decision`)
  }
})

t.test('anything else describe throws is a bug: thrown, never answered', async (t) => {
  const h = harness(t, new Error('decide must not be called'))
  await t.rejects(h.run(new TypeError('a transport bug'), callOf()), { name: 'TypeError', message: 'a transport bug' })
  t.strictSame(h.steps, [])
})

t.test("the decision is asked about the checked request, with the call's credentials, after former cookies are expired", async (t) => {
  const allow: EnvoyDecision = {
    answer: { kind: 'pass', outcome: 'pass', upstream: UPSTREAM, identity: ALICE, headers: { set: [], remove: [] } },
    logged: { outcome: 'pass' },
  }
  const h = harness(t, allow)
  const call = callOf({ ...JSON_ACCEPT, authorization: 'Bearer x' })
  await h.run(CHECKED, call, 'admin')
  t.strictSame(h.steps, ['expireFormer', 'decide'])
  const [asked] = h.decided
  t.equal(asked?.req.url, '/admin/users?page=2', "the checked request's target, not the check's")
  t.equal(asked?.req.cookies, call.cookies, "the client's cookies")
  t.equal(asked?.req.headers, call.headers, "the client's headers")
  t.equal(asked?.req.log, call.log)
  t.equal(asked?.reply, h.reply, "a refreshed session's cookies go to the transport's reply")
  t.equal(asked?.checked, CHECKED)
  t.equal(asked?.upstreamName, 'admin')
  t.equal(h.expired[0]?.url, '/admin/users?page=2', 'former cookies are expired for the checked request too')
})

t.test('a 403 names who it refused before the refusal is rendered', async (t) => {
  const page = await harness(t, refused(new GatewayError('forbidden', 'not for you'), BOB)).run(CHECKED, callOf(NAVIGATION))
  t.equal(page.identity, BOB, "the request line's sub")
  t.match(
    page.outcome,
    { kind: 'refused', code: 'forbidden', answer: { status: 403, headers: { 'content-type': /^text\/html/ } } },
    'a navigation gets the page',
  )
  t.match(
    page.outcome.kind === 'refused' ? page.outcome.answer.body : '',
    /Signed in as <strong>bob@example\.com<\/strong>/,
    "the page says who was refused (the decision's identity: no session is read)",
  )
  const program = await harness(t, refused(new GatewayError('forbidden', 'not for you'), BOB)).run(CHECKED, callOf())
  t.equal(program.identity, BOB)
  t.match(problemOf(program), { status: 403, code: 'forbidden' }, 'a program gets problem+json')
  t.strictSame(program.logged, { outcome: 'forbidden', upstream: 'admin' }, "the decision's own request-line fields")
})

t.test('a refusal without an identity names nobody, whatever the call held', async (t) => {
  const call = { ...callOf(), identity: ALICE }
  const error = new GatewayError('unauthenticated', 'sign in first', {
    headers: { 'www-authenticate': 'Bearer error="invalid_token"' },
    extensions: { signInUrl: 'https://x/' },
  })
  const written = await harness(t, refused(error)).run(CHECKED, call)
  t.equal(written.identity, null)
  t.match(written.outcome, {
    kind: 'refused',
    code: 'unauthenticated',
    answer: { status: 401, headers: { 'www-authenticate': 'Bearer error="invalid_token"', 'cache-control': 'no-store' } },
  })
  t.match(problemOf(written), { code: 'unauthenticated', signInUrl: 'https://x/' }, "the error's extensions")
  const nullIdentity = await harness(t, refused(new GatewayError('forbidden', 'x'), null)).run(CHECKED, { ...callOf(), identity: ALICE })
  t.equal(nullIdentity.identity, null, 'an explicit null too')
})

t.test("a page or JSON is decided by the checked request's method and the client's headers", async (t) => {
  const rows: Array<[string, string, IncomingHttpHeaders, RegExp]> = [
    ['a GET navigation', 'GET', NAVIGATION, /^text\/html/],
    ['a GET asking for HTML', 'GET', { accept: 'text/html' }, /^text\/html/],
    ['a POST with the same headers (its body would be lost)', 'POST', NAVIGATION, /^application\/problem\+json/],
    ['a program', 'GET', JSON_ACCEPT, /^application\/problem\+json/],
  ]
  for (const [name, method, headers, type] of rows) {
    const written = await harness(t, refused(new GatewayError('unauthenticated', 'sign in first'))).run(CHECKED, callOf(headers, method))
    t.match(written.outcome, { kind: 'refused', answer: { status: 401, headers: { 'content-type': type } } }, name)
  }
})

t.test('a 5xx refusal carries the request id a user quotes to the operator', async (t) => {
  const error = new GatewayError('decision_unavailable', 'the session store does not answer')
  const written = await harness(t, refused(error)).run(CHECKED, callOf())
  t.match(written.outcome, { kind: 'refused', code: 'decision_unavailable', answer: { status: 503 } })
  t.match(problemOf(written), { code: 'decision_unavailable', requestId: 'req-1' })
})

t.test("an allow and a sign-in are the decision's own results, passed through", async (t) => {
  const allow: Answer = {
    kind: 'pass',
    outcome: 'pass',
    upstream: UPSTREAM,
    identity: ALICE,
    headers: { set: [['x-forwarded-user', 'alice']], remove: ['x-forwarded-email'] },
  }
  const allowed = await harness(t, { answer: allow, logged: { outcome: 'pass' } }).run(CHECKED, callOf())
  t.equal(allowed.outcome, allow, 'the very result')
  t.equal(allowed.identity, ALICE, 'who was allowed')
  t.strictSame(allowed.logged, { outcome: 'pass' })

  const anonymous: Answer = { kind: 'pass', outcome: 'pass', upstream: UPSTREAM, identity: null, headers: { set: [], remove: [] } }
  const passed = await harness(t, { answer: anonymous, logged: { outcome: 'pass' } }).run(CHECKED, { ...callOf(), identity: BOB })
  t.equal(passed.identity, null, 'an anonymous pass names nobody')

  const signIn: Answer = { kind: 'sign_in', outcome: 'unauthenticated', upstream: UPSTREAM, identity: null, location: `${PUBLIC_URL}/api/v1/openid/redirect` }
  const sent = await harness(t, { answer: signIn, logged: { outcome: 'unauthenticated' } }).run(CHECKED, callOf(NAVIGATION))
  t.equal(sent.outcome, signIn, 'the very result')
  t.equal(sent.identity, null, 'nobody')
})

t.test('a decision that throws is a bug: thrown', async (t) => {
  const h = harness(t, new Error('store bug'))
  await t.rejects(h.run(CHECKED, callOf()), { message: 'store bug' })
})

t.test('statusOf: the status a check is recorded with', async (t) => {
  const answer = (status: number): CheckOutcome => ({ kind: 'refused', code: 'forbidden', answer: { status, headers: {}, body: '' } })
  const rows: Array<[string, CheckOutcome, number]> = [
    ['a pass', { kind: 'pass', outcome: 'pass', upstream: UPSTREAM, identity: null, headers: { set: [], remove: [] } }, 200],
    ['a sign-in redirect', { kind: 'sign_in', outcome: 'unauthenticated', upstream: UPSTREAM, identity: null, location: '/x' }, 302],
    ["a refusal: its answer's status", answer(403), 403],
    ['a refusal answered 401', answer(401), 401],
    ['a refusal answered 503', answer(503), 503],
  ]
  for (const [name, outcome, status] of rows) t.equal(statusOf(outcome), status, name)
  const written = await harness(t, refused(new GatewayError('method_not_allowed', 'no'))).run(CHECKED, callOf())
  t.equal(statusOf(written.outcome), 405, "a rendered refusal's status")
})
