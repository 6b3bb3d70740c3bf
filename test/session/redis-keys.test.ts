import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import t from 'tap'
import { BACKCHANNEL_LOGOUT_PATH, ENDPOINTS } from '#src/contract/endpoints'
import { BACKCHANNEL_LOGOUT_EVENT } from '#src/oidc/logout-token'
import { startRedis } from '../fixtures/redis.ts'
import { CLIENT_ID, startStack } from '../fixtures/stack.ts'

// Every key the gateway touches in Redis is under session.redis.keyPrefix (session/redis-keys.ts),
// so gateways sharing a database never meet. Redis's MONITOR sees each command the gateway
// sends, short-lived keys (refresh locks) included, which a listing at the end would miss.

const PREFIX = 'team-a:'
/** Commands that name no key. */
const KEYLESS = new Set(['ping', 'info', 'client', 'select', 'hello', 'auth', 'multi', 'exec', 'echo', 'quit', 'wait', 'script'])

/** The keys of one monitored command (ioredis hands its name and arguments). */
function keysOf(command: string, args: string[]): string[] {
  if (KEYLESS.has(command)) return []
  if (command === 'eval' || command === 'evalsha') return args.slice(2, 2 + Number(args[1]))
  if (command === 'del' || command === 'mget' || command === 'exists') return args
  return args.slice(0, 1)
}

for (const store of ['redis', 'cookie'] as const) {
  t.test(`${store} store: sign-in, refresh and back-channel logout write only keys under the prefix`, async (t) => {
    const redis = await startRedis(t)
    const client = new Redis(redis.url)
    const monitor = await client.monitor()
    const touched: string[] = []
    const seen = new Set<string>()
    monitor.on('monitor', (_time: string, [command, ...args]: string[]) => {
      const name = (command ?? '').toLowerCase()
      if (name === 'echo') seen.add(args[0] ?? '')
      touched.push(...keysOf(name, args))
    })

    const stack = await startStack(t, {
      backchannelLogout: true,
      provider: { rotateRefreshTokens: true },
      config: { session: { store, redisUrl: redis.url, redis: { keyPrefix: PREFIX } } },
    })
    const browser = await stack.signedIn('alice')
    const refreshed = await browser.fetch(stack.gw + ENDPOINTS.refresh.path)
    t.equal(refreshed.status, 200, 'refreshed')
    await refreshed.body?.cancel()
    const token = await stack.provider!.signJwt(
      { aud: CLIENT_ID, sub: 'alice', jti: randomUUID(), events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } },
      { typ: 'logout+jwt' },
    )
    const logout = await fetch(stack.gw + BACKCHANNEL_LOGOUT_PATH, { method: 'POST', body: new URLSearchParams({ logout_token: token }) })
    t.equal(logout.status, 200, 'logged out by the provider')

    // MONITOR reports commands in the order Redis ran them: once this marker is seen, so is
    // everything the gateway sent before it.
    const marker = randomUUID()
    await client.echo(marker)
    while (!seen.has(marker)) await new Promise((resolve) => monitor.once('monitor', resolve))

    // A user's keys start with the user's hash tag ({digest}:), the revocation list's with {revocations}.
    const kinds = new Set(
      touched.map(
        (key) =>
          key
            .slice(PREFIX.length)
            .replace(/^\{[A-Za-z0-9_-]{43}\}:/, '')
            .split(':')[0],
      ),
    )
    const expected =
      store === 'redis' ? ['session', 'sub', 'sid', 'sid-user', 'refresh-lock', 'refresh-attempt', 'refreshed', 'logout-jti'] : ['{revocations}', 'logout-jti']
    for (const kind of expected) t.ok(kinds.has(kind), `${kind} keys were written`)
    t.strictSame(
      touched.filter((key) => !key.startsWith(PREFIX)),
      [],
      'every key is under the prefix',
    )
    t.strictSame(
      (await client.keys('*')).filter((key) => !key.startsWith(PREFIX)),
      [],
      'and so is every key left',
    )
    // Before the server stops (the teardown), or they would reconnect to it.
    monitor.disconnect()
    client.disconnect()
  })
}
