import t from 'tap'
import {
  actionOf,
  CREDENTIAL_CHANGE,
  SESSION_REVOKED,
  STREAM_UPDATED,
  subjectOf,
  TOKEN_CLAIMS_CHANGE,
  VERIFICATION,
  type EventPolicy,
} from '#src/oidc/ssf-event'

// The verdict on each event type and subject format (OpenID CAEP 1.0 section 3, SSF 1.0 sections
// 3 and 8.1.4-5, RFC 9493): what ends, what refreshes, and that nothing unknown ends anything.

const END: EventPolicy = { credentialChange: 'end' }
const IGNORE: EventPolicy = { credentialChange: 'ignore' }
const ALICE = { format: 'iss_sub', iss: 'https://op.example.com', sub: 'alice' }

t.test('subject formats', async (t) => {
  t.same(subjectOf(ALICE), { iss: 'https://op.example.com', sub: 'alice' }, 'iss_sub: the issuer and its sub')
  t.same(subjectOf({ format: 'email', email: 'Alice@Example.com' }), { email: 'Alice@Example.com' }, 'email (compared case-insensitively by the store)')
  t.same(subjectOf({ format: 'opaque', id: 'alice' }), { sub: 'alice' }, "opaque: the stream's provider's sub")
  t.same(
    subjectOf({ format: 'complex', user: ALICE, session: { format: 'opaque', id: 'sid-1' } }),
    { iss: 'https://op.example.com', sub: 'alice', sid: 'sid-1' },
    'complex: user and session',
  )
  t.same(subjectOf({ format: 'complex', session: { format: 'opaque', id: 'sid-1' } }), { sid: 'sid-1' }, 'complex: the session alone')
  t.same(subjectOf({ format: 'complex', user: { format: 'email', email: 'a@example.com' } }), { email: 'a@example.com' }, 'complex: the user alone')
  // Nothing the gateway can name: undefined, so the event ends nothing.
  for (const [what, id] of [
    ['another format', { format: 'phone_number', phone_number: '+12065550100' }],
    ['account', { format: 'account', uri: 'acct:alice@example.com' }],
    ['no format', { sub: 'alice' }],
    ['iss_sub without iss', { format: 'iss_sub', sub: 'alice' }],
    ['iss_sub without sub', { format: 'iss_sub', iss: 'https://op.example.com' }],
    ['iss_sub with an empty sub', { format: 'iss_sub', iss: 'https://op.example.com', sub: '' }],
    ['email not a string', { format: 'email', email: ['a@example.com'] }],
    ['opaque without id', { format: 'opaque' }],
    ['complex with nothing known', { format: 'complex', user: { format: 'phone_number', phone_number: '+1' }, session: { format: 'uri', uri: 'x' } }],
    ['complex session not opaque', { format: 'complex', session: { format: 'email', email: 'a@example.com' } }],
    ['not an object', 'alice'],
    ['an array', [ALICE]],
    ['null', null],
  ] as const) {
    t.equal(subjectOf(id), undefined, what)
  }
})

t.test('session-revoked and credential-change end; token-claims-change refreshes', async (t) => {
  const subject = { iss: 'https://op.example.com', sub: 'alice' }
  t.same(actionOf({ type: SESSION_REVOKED, event: {}, subId: ALICE }, END), { kind: 'end', subject })
  t.same(
    actionOf({ type: CREDENTIAL_CHANGE, event: { credential_type: 'password', change_type: 'update' }, subId: ALICE }, END),
    { kind: 'end', subject },
    'credentialChange: end',
  )
  t.same(actionOf({ type: CREDENTIAL_CHANGE, event: {}, subId: ALICE }, IGNORE), { kind: 'ignore', reason: 'configured' }, 'credentialChange: ignore')
  t.same(
    actionOf({ type: SESSION_REVOKED, event: {}, subId: ALICE }, IGNORE),
    { kind: 'end', subject },
    'credentialChange: ignore leaves session-revoked alone',
  )
  t.same(actionOf({ type: TOKEN_CLAIMS_CHANGE, event: { claims: { role: 'admin' } }, subId: ALICE }, END), { kind: 'refresh', subject })
})

t.test("the event's own subject member when there is no sub_id (CAEP before SSF 1.0); sub_id wins", async (t) => {
  t.same(actionOf({ type: SESSION_REVOKED, event: { subject: { format: 'opaque', id: 'bob' } }, subId: undefined }, END), {
    kind: 'end',
    subject: { sub: 'bob' },
  })
  t.same(actionOf({ type: SESSION_REVOKED, event: { subject: { format: 'opaque', id: 'bob' } }, subId: ALICE }, END), {
    kind: 'end',
    subject: { iss: 'https://op.example.com', sub: 'alice' },
  })
})

t.test('an unknown or missing subject ends nothing', async (t) => {
  for (const type of [SESSION_REVOKED, CREDENTIAL_CHANGE, TOKEN_CLAIMS_CHANGE]) {
    t.same(
      actionOf({ type, event: {}, subId: { format: 'phone_number', phone_number: '+1' } }, END),
      { kind: 'ignore', reason: 'unknown_subject' },
      `${type}: unknown format`,
    )
    t.same(actionOf({ type, event: {}, subId: undefined }, END), { kind: 'ignore', reason: 'unknown_subject' }, `${type}: no subject`)
  }
})

t.test('unknown events end nothing, whatever their subject', async (t) => {
  for (const type of [
    'https://schemas.openid.net/secevent/caep/event-type/assurance-level-change',
    'https://schemas.openid.net/secevent/risc/event-type/account-disabled',
    'urn:example:event',
    '',
  ]) {
    t.same(actionOf({ type, event: {}, subId: ALICE }, END), { kind: 'ignore', reason: 'unknown_event' }, type || 'empty type')
  }
})

t.test('verification and stream-updated', async (t) => {
  t.same(actionOf({ type: VERIFICATION, event: { state: 'abc' }, subId: { format: 'opaque', id: 'stream-1' } }, END), { kind: 'verification', state: 'abc' })
  t.same(actionOf({ type: VERIFICATION, event: {}, subId: undefined }, END), { kind: 'verification', state: undefined }, 'no state')
  t.same(
    actionOf({ type: VERIFICATION, event: { state: 7 }, subId: undefined }, END),
    { kind: 'verification', state: undefined },
    'a state that is not a string',
  )
  t.same(actionOf({ type: STREAM_UPDATED, event: { status: 'paused' }, subId: undefined }, END), { kind: 'stream_updated', status: 'paused' })
})
