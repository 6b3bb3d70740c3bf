import { readFileSync } from 'node:fs'
import t from 'tap'
import { parseConfig } from '#src/config/load'
import { problems, resolve } from '../fixtures/config/base.ts'

// rateLimit.signIn: the per-client budget of the sign-in endpoints (routes/sign-in-hardening.ts).

t.test('defaults: 6000 requests per 60 seconds', async (t) => {
  t.strictSame(resolve().rateLimit, { signIn: { max: 6000, windowSeconds: 60 } })
  t.strictSame(resolve({ rateLimit: null }).rateLimit, { signIn: { max: 6000, windowSeconds: 60 } }, 'an empty section')
  t.strictSame(resolve({ rateLimit: { signIn: { max: 10 } } }).rateLimit, { signIn: { max: 10, windowSeconds: 60 } }, 'partial')
})

t.test('valid values', async (t) => {
  for (const signIn of [{ max: 0 }, { max: 1, windowSeconds: 1 }, { max: 1000000, windowSeconds: 86400 }]) {
    t.strictSame(problems({ rateLimit: { signIn } }), [], JSON.stringify(signIn))
  }
})

t.test('invalid values name the key', async (t) => {
  const cases: Array<[unknown, string[]]> = [
    [{ max: -1 }, ['rateLimit.signIn.max: must be between 0 and 1000000']],
    [{ max: 1000001 }, ['rateLimit.signIn.max: must be between 0 and 1000000']],
    [{ max: 2.5 }, ['rateLimit.signIn.max: must be an integer']],
    [{ max: 'many' }, ['rateLimit.signIn.max: must be an integer']],
    [{ windowSeconds: 0 }, ['rateLimit.signIn.windowSeconds: must be between 1 and 86400']],
    [{ windowSeconds: 86401 }, ['rateLimit.signIn.windowSeconds: must be between 1 and 86400']],
    [{ window: 60 }, ['rateLimit.signIn.window: unknown key']],
  ]
  for (const [signIn, expected] of cases) t.strictSame(problems({ rateLimit: { signIn } }), expected, JSON.stringify(signIn))
  t.strictSame(problems({ rateLimit: { login: {} } }), ['rateLimit.login: unknown key'])
  t.strictSame(problems({ rateLimit: 'off' }), ['rateLimit: must be a mapping'])
})

t.test('numbers may come from the environment', async (t) => {
  const config = resolve({ rateLimit: { signIn: { max: '${SIGNIN_MAX}', windowSeconds: '${SIGNIN_WINDOW:-30}' } } }, { SIGNIN_MAX: '120' })
  t.strictSame(config.rateLimit, { signIn: { max: 120, windowSeconds: 30 } })
})

t.test('the annotated example shows the defaults', async (t) => {
  const text = readFileSync(new URL('../../config/gateway.example.yaml', import.meta.url), 'utf8')
  const config = parseConfig(text, { OIDC_CLIENT_SECRET: 'x'.repeat(20), COOKIE_SECRET: 'c'.repeat(40) })
  t.strictSame(config.rateLimit, resolve().rateLimit)
})
