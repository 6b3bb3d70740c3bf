// Header names the gateway manages are refused as identity headers by `check` and by `run`, before
// listening, each line naming the key and the header (config/formats.ts checkHeaderName,
// config/cross-key/upstreams.ts). Without it a claimHeaders entry `Txn-Token: name` sent the
// user's display name to the application where its Transaction Token belongs.

import t, { type Test } from 'tap'
import { cli, configFile, type Run, SECRETS_ENV, valid } from '../fixtures/cli.ts'
import { freePort } from '../fixtures/stack.ts'

/** `command` on `path` to its end; a run that wrongly starts is stopped when the test ends. */
async function refused(t: Test, command: string, path: string): Promise<Run> {
  const ran = cli([command, '--config', path], SECRETS_ENV)
  t.teardown(() => ran.kill('SIGTERM'))
  return ran.done
}

t.test('check and run refuse managed header names, naming the key and the header', async (t) => {
  const base = valid(await freePort(), 'http://127.0.0.1:3000')
  const path = configFile({
    ...base,
    upstreams: [
      {
        name: 'app',
        target: 'http://127.0.0.1:3000',
        identityHeaders: { user: 'Host', email: 'X-Forwarded-Login', groups: 'X-Identity-Assertion' },
        claimHeaders: { 'Txn-Token': 'name', Authorization: 'email', 'X-Forwarded-Prefix': 'department' },
      },
    ],
  })
  const lines = [
    'upstreams[0].identityHeaders.user: must not be Host, a header that HTTP or the gateway itself manages',
    'upstreams[0].identityHeaders.email: must not be X-Forwarded-Login, one of the forwarded headers (X-Forwarded-*) the gateway manages; of those only its identity header names may be used (X-Forwarded-User, X-Forwarded-Email, X-Forwarded-Groups, X-Forwarded-Preferred-Username, X-Forwarded-Issuer, X-Forwarded-Acr, X-Forwarded-Amr, X-Forwarded-Auth-Time)',
    'upstreams[0].claimHeaders.Txn-Token: must not be Txn-Token, the header the gateway sends Transaction Tokens in (upstreams[].transactionTokens)',
    'upstreams[0].claimHeaders.Authorization: must not be Authorization, a header that HTTP or the gateway itself manages',
    'upstreams[0].claimHeaders.X-Forwarded-Prefix: must not be X-Forwarded-Prefix, a header that HTTP or the gateway itself manages',
  ]
  for (const command of ['check', 'run']) {
    const ran = await refused(t, command, path)
    t.equal(ran.code, 2, `${command} exits 2`)
    for (const line of lines) t.match(ran.stderr, `  ${line}\n`, `${command}: ${line}`)
  }
  // The assertion header is refused once the other refusals of identityHeaders are gone (a key
  // with a problem of its own is not compared with others).
  const assertion = configFile({
    ...base,
    upstreams: [{ name: 'app', target: 'http://127.0.0.1:3000', identityHeaders: { groups: 'x_identity_assertion' } }],
  })
  for (const command of ['check', 'run']) {
    const ran = await refused(t, command, assertion)
    t.equal(ran.code, 2, `${command} exits 2`)
    t.match(ran.stderr, '  upstreams[0].identityHeaders.groups: x_identity_assertion is the same header as assertions.header (X-Identity-Assertion)\n')
  }
})
