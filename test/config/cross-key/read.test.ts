// What every cross-key rule reads through (config/cross-key/read.ts): a key that has a problem of its
// own, or lies under one, is not read, so a rule never builds on a broken value and says nothing
// more of it.

import t from 'tap'
import { problems } from '../../fixtures/config/base.ts'

t.test('a cross-check is skipped when a key it reads is itself wrong', async (t) => {
  t.strictSame(problems({ cookies: { sameSite: 'none', secure: 'no' } }), ['cookies.secure: must be true or false'])
  t.strictSame(problems({ provider: { issuer: 'http://idp.example.com', allowInsecureHttp: 'true' } }), [
    'provider.allowInsecureHttp: must be true or false',
  ])
  t.strictSame(problems({ session: { redisUrl: 'http://x' } }), ['session.redisUrl: must be a redis:// or rediss:// URL'])
  t.strictSame(problems({ session: { redisUrl: '${REDIS_URL}' } }), ['session.redisUrl: environment variable REDIS_URL is not set'])
  t.strictSame(
    problems({
      upstreams: [
        { name: 'app', target: 'http://127.0.0.1:3000', match: { pathPrefix: '/a' } },
        { name: 'app2', target: 'http://127.0.0.1:3000', match: { pathPrefix: '/a', hosts: ['*'] } },
      ],
    }),
    ['upstreams[1].match.hosts[0]: must not contain wildcards'],
  )
})
