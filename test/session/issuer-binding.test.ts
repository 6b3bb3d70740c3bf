import t from 'tap'
import { issuerBinding, sessionOfIssuer } from '#src/session/issuer-binding'

// A session is a user of the issuer it was signed in at (OpenID Connect Core 2); one whose
// provider now names another issuer must end. A session sealed before the issuer was recorded is
// taken to be of its provider's issuer at the process's start, while the provider still names it.

const STAFF = 'https://staff.example.com'
const TENANT = 'https://tenant.example.com'

t.test('a session of the configured issuer is kept; of another, ended', async (t) => {
  const session = { provider: 'default', issuer: STAFF }
  t.equal(sessionOfIssuer(session, STAFF, STAFF), session)
  t.equal(sessionOfIssuer(session, TENANT, STAFF), undefined, 're-pointed by a reload')
  t.equal(sessionOfIssuer(session, TENANT, TENANT), undefined, 'also when the process started on the new issuer')
  t.equal(sessionOfIssuer(session, undefined, STAFF), undefined, 'its provider no longer configured')
})

t.test('a session that recorded no issuer: the issuer at the start, stamped, only while still configured', async (t) => {
  const legacy = { provider: 'default' }
  t.same(sessionOfIssuer(legacy, STAFF, STAFF), { provider: 'default', issuer: STAFF }, 'stamped: its next write seals it')
  t.equal(sessionOfIssuer(legacy, TENANT, STAFF), undefined, 'a reload re-pointed the provider: ended')
  t.equal(sessionOfIssuer(legacy, STAFF, undefined), undefined, 'a provider added by a reload has no sessions from before')
})

t.test('issuerBinding reads each provider by name', async (t) => {
  const now = new Map([
    ['staff', STAFF],
    ['partner', TENANT],
  ])
  const bind = issuerBinding(
    (name) => now.get(name),
    () => STAFF,
  )
  t.ok(bind({ provider: 'staff', issuer: STAFF }))
  t.notOk(bind({ provider: 'partner', issuer: STAFF }), "another provider's issuer")
  t.notOk(bind({ provider: 'partner' }), 'recorded none, and the partner did not start on STAFF')
})
