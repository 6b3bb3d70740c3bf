import { request } from 'node:http'
import t from 'tap'
import { problems } from '../fixtures/config/base.ts'
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../fixtures/otlp.ts'
import { eventually } from '../fixtures/poll.ts'
import { startRedis } from '../fixtures/redis.ts'
import { startStack, type Stack, type StackOptions, type Teardown } from '../fixtures/stack.ts'

// telemetry.tracing end to end: a real dev provider, echo upstream and gateway, exporting to an
// OTLP/HTTP receiver started here (test/fixtures/otlp.ts). Spans are awaited by polling the
// receiver (the batch waits batchDelayMs), or sent by a clean stop where nothing must arrive.

const SERVER = 2
const CLIENT = 3
const INTERNAL = 1

interface Traced {
  stack: Stack
  receiver: OtlpReceiver
  lines: string[]
}

async function tracedStack(t: Teardown, tracing: Record<string, unknown> = {}, options: StackOptions = {}): Promise<Traced> {
  const receiver = await startOtlpReceiver(t)
  const lines: string[] = []
  const stack = await startStack(t, {
    ...options,
    config: {
      ...options.config,
      telemetry: { tracing: { endpoint: receiver.endpoint, batchDelayMs: 20, ...tracing } },
      log: { level: 'info' },
    },
    logStream: { write: (line: string) => void lines.push(line) },
  })
  return { stack, receiver, lines }
}

function requestLine(lines: string[], url: string): Record<string, unknown> | undefined {
  return lines.map((line) => JSON.parse(line) as Record<string, unknown>).find((line) => line.msg === 'request' && line.url === url)
}

const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan): ReceivedSpan[] =>
  spans.filter((span) => span.traceId === parent.traceId && span.parentSpanId === parent.spanId)

/** The server span of the request to `path`, once exported. */
function serverSpan(receiver: OtlpReceiver, path: string): Promise<ReceivedSpan> {
  return eventually(`the server span of ${path}`, () => receiver.spans.find((span) => span.kind === SERVER && span.attributes['url.path'] === path))
}

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const PARENT = '00f067aa0ba902b7'

t.test('a sign-in: the redirect, then the callback with its token call below it', async (t) => {
  const { stack, receiver } = await tracedStack(t)
  const browser = await stack.signedIn()
  const cookie = browser.cookieHeader(`${stack.gw}/page`)

  const redirect = await serverSpan(receiver, '/api/v1/openid/redirect')
  t.equal(redirect.name, 'GET /api/v1/openid/redirect')
  t.equal(redirect.parentSpanId, '', 'a browser navigation starts a trace')
  t.equal(redirect.attributes['http.response.status_code'], 302)
  t.equal(redirect.service, 'openid-gateway')

  const callback = await serverSpan(receiver, '/api/v1/openid/callback')
  t.equal(callback.name, 'GET /api/v1/openid/callback')
  const token = await eventually('the token call', () =>
    childrenOf(receiver.spans, callback).find((span) => span.attributes['openid_gateway.provider.call'] === 'token'),
  )
  t.equal(token.kind, CLIENT)
  t.equal(token.name, `POST ${new URL(stack.provider?.issuer ?? '').pathname.replace(/\/$/, '')}/token`)
  t.match(token.attributes, {
    'http.request.method': 'POST',
    'openid_gateway.grant_type': 'authorization_code',
    'http.response.status_code': 200,
    'openid_gateway.provider': 'default',
  })

  const discovery = receiver.spans.find((span) => span.attributes['openid_gateway.provider.call'] === 'discovery')
  t.ok(discovery, 'discovery is a span of its own')
  t.equal(receiver.contentTypes[0], 'application/json', 'OTLP/HTTP with JSON')

  // Never a code, a state, a token or a cookie in an attribute.
  const values = receiver.spans.flatMap((span) => Object.values(span.attributes).map(String))
  t.notOk(
    values.some((value) => value.includes('?')),
    'no query string',
  )
  for (const pair of cookie.split('; '))
    t.notOk(
      values.some((value) => value.includes(pair.split('=')[1] ?? '')),
      'no cookie value',
    )
})

t.test(
  'a proxied request: the server span, the decision and the upstream call below it, whose traceparent the upstream receives; the trace id in the request line',
  async (t) => {
    const { stack, receiver, lines } = await tracedStack(t)
    const browser = await stack.signedIn()
    t.equal((await browser.fetch(`${stack.gw}/page?x=1`)).status, 200)

    const server = await serverSpan(receiver, '/page')
    t.equal(server.name, 'GET /*')
    t.match(server.attributes, {
      'http.route': '/*',
      'http.request.method': 'GET',
      'http.response.status_code': 200,
      'openid_gateway.upstream': 'app',
      'client.address': '127.0.0.1',
    })
    const children = await eventually('the decision and the upstream call', () => {
      const found = childrenOf(receiver.spans, server)
      return found.length === 2 ? found : undefined
    })
    const decision = children.find((span) => span.name === 'access decision')
    t.equal(decision?.kind, INTERNAL)
    t.equal(decision?.attributes['openid_gateway.decision'], 'pass')
    const upstream = children.find((span) => span.kind === CLIENT)
    t.match(upstream?.attributes, { 'http.request.method': 'GET', 'http.response.status_code': 200, 'url.full': `${stack.upstream.url}/page` })

    const received = stack.upstream.requests.find((req) => req.url === '/page?x=1')
    t.equal(received?.headers.traceparent, `00-${server.traceId}-${upstream?.spanId}-01`, "the upstream's parent is the upstream call")

    const line = requestLine(lines, '/page?x=1')
    t.equal(line?.trace_id, server.traceId)
    t.equal(line?.span_id, server.spanId)
  },
)

t.test('a page load without a session: the decision span says it was answered with a redirect to sign in, and nothing goes upstream', async (t) => {
  const { stack, receiver } = await tracedStack(t)
  const res = await fetch(`${stack.gw}/signed-out-page`, { headers: { accept: 'text/html', 'sec-fetch-mode': 'navigate' }, redirect: 'manual' })
  t.equal(res.status, 302)
  const server = await serverSpan(receiver, '/signed-out-page')
  const decision = await eventually('the decision span', () => childrenOf(receiver.spans, server).find((span) => span.name === 'access decision'))
  t.equal(decision.attributes['openid_gateway.decision'], 'redirect')
  t.notOk(
    childrenOf(receiver.spans, server).some((span) => span.kind === CLIENT),
    'no upstream call',
  )
})

t.test('a traceparent is continued from a trusted proxy only; an untrusted one is replaced upstream', async (t) => {
  const sent = { traceparent: `00-${TRACE}-${PARENT}-01`, tracestate: 'vendor=chosen' }

  t.test('untrusted (no server.trustedProxies): a trace of its own', async (t) => {
    const { stack, receiver } = await tracedStack(t)
    const browser = await stack.signedIn()
    await browser.fetch(`${stack.gw}/untrusted`, { headers: sent })
    const server = await serverSpan(receiver, '/untrusted')
    t.not(server.traceId, TRACE)
    t.equal(server.parentSpanId, '')
    const received = stack.upstream.requests.find((req) => req.url === '/untrusted')
    t.match(received?.headers.traceparent, new RegExp(`^00-${server.traceId}-[0-9a-f]{16}-01$`))
    t.equal(received?.headers.tracestate, undefined, "the client's tracestate does not reach the upstream")
  })

  t.test('trusted (the peer is in server.trustedProxies): continued, tracestate too', async (t) => {
    const { stack, receiver } = await tracedStack(t, {}, { config: { server: { trustedProxies: ['127.0.0.1'] } } })
    const browser = await stack.signedIn()
    await browser.fetch(`${stack.gw}/trusted`, { headers: sent })
    const server = await serverSpan(receiver, '/trusted')
    t.equal(server.traceId, TRACE)
    t.equal(server.parentSpanId, PARENT)
    const received = stack.upstream.requests.find((req) => req.url === '/trusted')
    t.match(received?.headers.traceparent, new RegExp(`^00-${TRACE}-[0-9a-f]{16}-01$`))
    t.equal(received?.headers.tracestate, 'vendor=chosen')
  })

  t.test('trustIncoming: never ignores even a trusted proxy', async (t) => {
    const { stack, receiver } = await tracedStack(t, { trustIncoming: 'never' }, { config: { server: { trustedProxies: ['127.0.0.1'] } } })
    const browser = await stack.signedIn()
    await browser.fetch(`${stack.gw}/never`, { headers: sent })
    const server = await serverSpan(receiver, '/never')
    t.not(server.traceId, TRACE)
  })
})

t.test('sampleRatio 0 exports nothing, even for a client asking for sampling, yet passes a traceparent upstream and logs the trace id', async (t) => {
  const { stack, receiver, lines } = await tracedStack(t, { sampleRatio: 0 })
  const browser = await stack.signedIn()
  await browser.fetch(`${stack.gw}/unsampled`, { headers: { traceparent: `00-${TRACE}-${PARENT}-01` } })
  // A clean stop sends every span still waiting (next test): after it, none may have been sampled.
  await stack.live.close(1000)
  t.strictSame(receiver.spans, [])
  const line = requestLine(lines, '/unsampled')
  const received = stack.upstream.requests.find((req) => req.url === '/unsampled')
  t.match(received?.headers.traceparent, new RegExp(`^00-${String(line?.trace_id)}-[0-9a-f]{16}-00$`), 'not sampled, and the same trace as the line')
  t.not(line?.trace_id, TRACE)
})

t.test('a clean stop sends the spans still waiting in the batch', async (t) => {
  const { stack, receiver } = await tracedStack(t, { batchDelayMs: 60000 })
  const browser = await stack.signedIn()
  await browser.fetch(`${stack.gw}/last`)
  t.strictSame(receiver.spans, [], 'nothing sent before the batch delay')
  await stack.live.close(1000)
  t.ok(receiver.spans.some((span) => span.attributes['url.path'] === '/last'))
})

t.test('Redis commands are spans below the decision, without keys or values', async (t) => {
  const redis = await startRedis(t)
  const { stack, receiver } = await tracedStack(t, {}, { config: { session: { store: 'redis', redisUrl: redis.url } } })
  const browser = await stack.signedIn()
  await browser.fetch(`${stack.gw}/stored`)
  const server = await serverSpan(receiver, '/stored')
  const decision = await eventually('the decision', () => childrenOf(receiver.spans, server).find((span) => span.name === 'access decision'))
  const command = await eventually('a Redis command', () => childrenOf(receiver.spans, decision).find((span) => span.attributes['db.system.name'] === 'redis'))
  t.equal(command.kind, CLIENT)
  t.equal(command.name, 'GET')
  t.strictSame(command.attributes, {
    'db.system.name': 'redis',
    'server.address': '127.0.0.1',
    'server.port': redis.port,
    'db.namespace': '0',
    'db.operation.name': 'GET',
  })
})

t.test('the configuration refuses a bad endpoint and a ratio out of range, naming the key', async (t) => {
  t.strictSame(problems({ telemetry: { tracing: { endpoint: 'collector:4318' } } }), ['telemetry.tracing.endpoint: must be an http(s) URL'])
  t.strictSame(problems({ telemetry: { tracing: { endpoint: 'http://collector:4318/v1/traces', sampleRatio: 1.5 } } }), [
    'telemetry.tracing.sampleRatio: must be between 0 and 1',
  ])
  t.strictSame(problems({ telemetry: { tracing: {} } }), ['telemetry.tracing.endpoint: is required'])
  t.strictSame(problems({ telemetry: { tracing: { endpoint: 'http://collector:4318/v1/traces' } } }), [])
})

t.test('a sign-out: the revocation call below its server span, though the form body arrived after the request was routed', async (t) => {
  const { stack, receiver } = await tracedStack(t)
  const browser = await stack.signedIn()
  // Expect: 100-continue holds the body back until the gateway has taken the request (Node answers
  // 100 as it hands the request over): the body is then read on the socket's events, outside the
  // request's first run through Fastify's hooks.
  const status = await new Promise<number | undefined>((resolve, reject) => {
    const req = request(`${stack.gw}/api/v1/openid/sign-out`, {
      method: 'POST',
      headers: {
        cookie: browser.cookieHeader(`${stack.gw}/api/v1/openid/sign-out`),
        origin: stack.gw,
        'content-type': 'application/x-www-form-urlencoded',
        'content-length': '3',
        expect: '100-continue',
      },
    })
    req.on('continue', () => req.end('a=b'))
    req.on('response', (res) => {
      res.resume()
      resolve(res.statusCode)
    })
    req.on('error', reject)
    req.flushHeaders()
  })
  t.equal(status, 303)
  const server = await serverSpan(receiver, '/api/v1/openid/sign-out')
  const revocation = await eventually('the revocation call', () =>
    receiver.spans.find((span) => span.attributes['openid_gateway.provider.call'] === 'revocation'),
  )
  t.equal(revocation.traceId, server.traceId)
  t.equal(revocation.parentSpanId, server.spanId)
})
