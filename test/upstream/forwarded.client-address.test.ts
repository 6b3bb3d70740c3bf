// The client's address a Transaction Token's rctx.req_ip names: the X-Forwarded-For decision's.

import t from 'tap'
import { createTrustCheck } from '#src/ops/trusted-peers'
import { clientAddress } from '#src/upstream/forwarded'

const trusted = createTrustCheck(['10.0.0.0/8'])

t.test('an untrusted peer is the client, whatever X-Forwarded-For it sends', async (t) => {
  t.equal(clientAddress({ 'x-forwarded-for': '198.51.100.1' }, '203.0.113.9', trusted), '203.0.113.9')
})

t.test('a trusted peer: the nearest untrusted hop of its X-Forwarded-For, from the right', async (t) => {
  t.equal(clientAddress({ 'x-forwarded-for': '198.51.100.1, 203.0.113.9, 10.0.0.2' }, '10.0.0.1', trusted), '203.0.113.9')
  t.equal(clientAddress({ 'x-forwarded-for': ['198.51.100.1', '203.0.113.9'] }, '10.0.0.1', trusted), '203.0.113.9', 'repeated headers read as one list')
  t.equal(clientAddress({}, '10.0.0.1', trusted), '10.0.0.1', 'a trusted peer that names no one is the client')
})

t.test('nothing that is no address goes into a signed statement', async (t) => {
  t.equal(clientAddress({ 'x-forwarded-for': '198.51.100.1, not-an-ip' }, '10.0.0.1', trusted), undefined)
  t.equal(clientAddress({ 'x-forwarded-for': '10.0.0.3, 10.0.0.2' }, '10.0.0.1', trusted), undefined, 'every hop trusted')
  t.equal(clientAddress({}, undefined, trusted), undefined)
})
