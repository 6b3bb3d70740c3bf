import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { eventually } from '../fixtures/poll.ts'

// The tests' wait (test/fixtures/poll.ts eventually) keeps its deadline even when a look never
// finishes: a peer that accepts the connection and answers nothing (Keycloak while it starts) must
// fail the wait naming what was awaited, not hold the file until tap's timeout.

t.test('a wait whose look hangs fails at its deadline, naming what it awaited', async (t) => {
  const silent = createServer(() => {
    // Never answers.
  })
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    silent.closeAllConnections()
    silent.close()
  })
  const url = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/`
  const started = Date.now()
  await t.rejects(
    eventually('a silent peer to answer', async () => (await fetch(url)).ok, 500),
    { message: 'not within 500 ms: a silent peer to answer (the last look had not finished)' },
  )
  const took = Date.now() - started
  t.ok(took < 5_000, `failed after ${took} ms, near its deadline`)
})

t.test('a wait whose looks finish still returns the first truthy one', async (t) => {
  let looks = 0
  t.equal(await eventually('the third look', async () => (++looks === 3 ? 'found' : undefined), 2_000), 'found')
  t.equal(looks, 3)
})
