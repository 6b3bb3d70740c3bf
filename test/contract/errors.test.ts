import t from 'tap'
import { GatewayError } from '#src/contract/errors'

t.test('a GatewayError captures no stack (an answer, not a fault) and leaves the limit as it was', async (t) => {
  const limit = Error.stackTraceLimit
  const err = new GatewayError('unauthenticated', 'sign in first')
  t.notMatch(String(err.stack), /\n\s+at /, 'no frames')
  t.equal(Error.stackTraceLimit, limit)
  t.match(new Error('a fault').stack, /\n\s+at /, 'other errors keep their frames')
  t.same(err.toProblem(), {
    type: 'urn:openid-gateway:problem:unauthenticated',
    title: 'Not signed in',
    status: 401,
    detail: 'sign in first',
    code: 'unauthenticated',
  })
})
