import t from 'tap'
import { createTrustCheck } from '#src/ops/trusted-peers'

// server.trustedProxies: whose X-Forwarded-* and traceparent the gateway believes.

t.test('an empty list trusts nobody', async (t) => {
  const trusted = createTrustCheck([])
  for (const address of ['127.0.0.1', '::1', undefined]) t.equal(trusted(address), false, String(address))
})

t.test('addresses and subnets, IPv4 and IPv6', async (t) => {
  const trusted = createTrustCheck(['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', '::1'])
  const cases: Array<[string | undefined, boolean]> = [
    ['10.1.2.3', true],
    ['11.0.0.1', false],
    ['192.0.2.7', true],
    ['192.0.2.8', false],
    ['2001:db8::5', true],
    ['2001:db9::5', false],
    ['::1', true],
    [undefined, false],
  ]
  for (const [address, want] of cases) t.equal(trusted(address), want, String(address))
})

t.test('an IPv4 peer of a dual-stack socket, reported IPv4-mapped, is judged as IPv4', async (t) => {
  const trusted = createTrustCheck(['10.0.0.0/8'])
  t.equal(trusted('::ffff:10.0.0.1'), true)
  t.equal(trusted('::ffff:11.0.0.1'), false)
})
