import t from 'tap'
import { connect } from 'node:net'
import { reservePort } from '../fixtures/stack.ts'

// A reserved port (test/fixtures/stack.ts reservePort) is released at once even while a peer holds
// a connection to it: a gateway discovering its provider connects to the provider's reserved port
// before the provider starts, and the release must not wait for that gateway to give up.

t.test('a reservation is released at once while a peer holds a connection to it, and the port is free again', async (t) => {
  const reservation = await reservePort()
  const peer = connect(reservation.port, '127.0.0.1')
  t.teardown(() => peer.destroy())
  await new Promise<void>((resolve) => peer.once('connect', resolve))
  const closed = new Promise<void>((resolve) => peer.once('close', () => resolve()))
  const started = Date.now()
  await reservation.release()
  t.ok(Date.now() - started < 2_000, 'released without waiting for the peer')
  await closed
  t.pass("the peer's connection is closed")
})
