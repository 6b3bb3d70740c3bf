import { Client, credentials, Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js'
import pino from 'pino'
import { loggerOptions } from '#src/ops/logging'
import { DEFAULT_REDACTED_QUERY_PARAMS } from '#src/options/schema'
import t from 'tap'
import { startEnvoyGrpcServer, type EnvoyGrpcServerOptions } from '#src/checks/envoy-grpc/server'
import type { CheckAnswer, CheckInput } from '#src/checks/envoy-grpc/types'
import { checkRequest, grpcClient, type DecodedCheckResponse, type ExtAuthzClient } from '../../fixtures/ext-authz-grpc.ts'
import type { Teardown } from '../../fixtures/stack.ts'
import { eventually } from '../../fixtures/poll.ts'

// The ext_authz gRPC service on an ephemeral loopback port, asked by a real grpc-js client loaded
// from the same .proto files, with a stub decision: what Envoy sends reaches `check` as the
// gateway needs it, every answer comes back as Envoy reads it, failures are refusals, and the
// health service tells Envoy's health checker when the gateway can decide.

const OVERWRITE = 2
const APPEND = 0
const SECRET_COOKIE = 'ogw=sealed-session-secret'

const ALLOW: CheckAnswer = { allow: true, upstreamHeaders: [], removeHeaders: [], responseHeaders: [] }

interface Started {
  client: ExtAuthzClient
  port: number
  inputs: CheckInput[]
  logs: () => string
  answer(next: CheckAnswer | Error): void
  setReady(next: boolean | Error): void
  close(): Promise<void>
}

async function start(t: Teardown, overrides: Partial<EnvoyGrpcServerOptions> = {}): Promise<Started> {
  const lines: string[] = []
  const inputs: CheckInput[] = []
  let answer: CheckAnswer | Error = ALLOW
  let ready: boolean | Error = true
  const service = await startEnvoyGrpcServer({
    host: '127.0.0.1',
    port: 0,
    // The gateway's own logger options: its serializers redact every `url` field.
    log: pino(loggerOptions({ level: 'debug', redactQueryParams: [...DEFAULT_REDACTED_QUERY_PARAMS] }), { write: (line: string) => lines.push(line) }),
    check: async (input) => {
      inputs.push(input)
      if (answer instanceof Error) throw answer
      return answer
    },
    ready: () => {
      if (ready instanceof Error) throw ready
      return ready
    },
    ...overrides,
  })
  t.teardown(() => service.close())
  const client = grpcClient(`127.0.0.1:${service.port}`)
  t.teardown(() => client.close())
  return {
    client,
    port: service.port,
    inputs,
    logs: () => lines.join(''),
    answer: (next) => (answer = next),
    setReady: (next) => (ready = next),
    close: () => service.close(),
  }
}

function denied(response: DecodedCheckResponse): {
  code: number | undefined
  status: number | undefined
  headers: Array<[string, string, number]>
  body: string | undefined
} {
  return {
    code: response.status?.code,
    status: response.denied_response?.status?.code,
    headers: (response.denied_response?.headers ?? []).map((h) => [h.header.key, h.header.value, h.append_action]),
    body: response.denied_response?.body,
  }
}

const HTTP = { method: 'GET', host: 'app.example.com', path: '/page?x=1', scheme: 'https' }

t.test('binds the given host on a free port', async (t) => {
  const { port, client } = await start(t)
  t.ok(port > 0, `port ${port}`)
  t.equal((await client.check(checkRequest(HTTP))).status?.code, 0)
})

t.test('the request attributes reach check: method, host, path, scheme, lower-cased headers, the upstream', async (t) => {
  const { client, inputs } = await start(t)
  await client.check(
    checkRequest(
      {
        id: 'req-1',
        method: 'POST',
        host: 'app.example.com:8443',
        path: '/api/items?q=a%20b&r=1',
        scheme: 'https',
        protocol: 'HTTP/1.1',
        headers: { ':authority': 'app.example.com:8443', Accept: 'text/html', cookie: 'a=1; b=2', 'X-Forwarded-User': 'forged' },
      },
      { upstream: 'app', other: 'ignored' },
    ),
  )
  t.strictSame(inputs, [
    {
      method: 'POST',
      host: 'app.example.com:8443',
      path: '/api/items?q=a%20b&r=1',
      scheme: 'https',
      headers: { ':authority': 'app.example.com:8443', accept: 'text/html', cookie: 'a=1; b=2', 'x-forwarded-user': 'forged' },
      upstream: 'app',
    },
  ])
  inputs.length = 0
  await client.check(checkRequest({ ...HTTP, headers: {} }))
  t.strictSame(inputs, [{ ...HTTP, headers: {}, upstream: undefined }], 'no context extension: no upstream named')
})

t.test('header_map (encode_raw_headers): raw values as UTF-8, repeated names joined, merged over the map', async (t) => {
  const { client, inputs } = await start(t)
  await client.check(
    checkRequest({
      ...HTTP,
      headers: { accept: 'application/json', 'x-only-in-map': 'm' },
      header_map: {
        headers: [
          { key: 'Cookie', raw_value: Buffer.from('a=1') },
          { key: 'cookie', raw_value: Buffer.from('b=2') },
          { key: 'accept', raw_value: Buffer.from('text/html') },
          { key: 'Accept', raw_value: Buffer.from('*/*') },
          { key: 'x-name', raw_value: Buffer.from('José', 'utf8') },
          { key: 'x-value-field', value: 'from value' },
          { key: 'x-empty', raw_value: Buffer.alloc(0) },
        ],
      },
    }),
  )
  t.strictSame(inputs[0]?.headers, {
    accept: 'text/html, */*',
    'x-only-in-map': 'm',
    cookie: 'a=1; b=2',
    'x-name': 'José',
    'x-value-field': 'from value',
    'x-empty': '',
  })
})

t.test('allow: code OK, upstream headers overwrite, removals, every Set-Cookie appended', async (t) => {
  const { client, answer } = await start(t)
  answer({
    allow: true,
    upstreamHeaders: [
      ['x-forwarded-user', 'alice'],
      ['cookie', 'app=1'],
    ],
    removeHeaders: ['x-forwarded-email', 'authorization'],
    responseHeaders: [
      ['set-cookie', 'ogw=a; Path=/; HttpOnly'],
      ['set-cookie', 'ogw.1=b; Path=/; HttpOnly'],
    ],
  })
  const response = await client.check(checkRequest(HTTP))
  t.equal(response.status?.code, 0)
  t.equal(response.http_response, 'ok_response')
  const ok = response.ok_response
  t.strictSame(
    ok?.headers.map((h) => [h.header.key, h.header.value, h.append_action]),
    [
      ['x-forwarded-user', 'alice', OVERWRITE],
      ['cookie', 'app=1', OVERWRITE],
    ],
  )
  t.strictSame(ok?.headers_to_remove, ['x-forwarded-email', 'authorization'])
  t.strictSame(
    ok?.response_headers_to_add.map((h) => [h.header.key, h.header.value, h.append_action]),
    [
      ['set-cookie', 'ogw=a; Path=/; HttpOnly', APPEND],
      ['set-cookie', 'ogw.1=b; Path=/; HttpOnly', APPEND],
    ],
  )
})

t.test('each refusal over the wire: gRPC code, status, headers and body', async (t) => {
  const { client, answer } = await start(t)
  // [answer status, gRPC code, status the client gets]
  const table: Array<[number, number, number]> = [
    [302, GrpcStatus.UNAUTHENTICATED, 302],
    [401, GrpcStatus.UNAUTHENTICATED, 401],
    [400, GrpcStatus.INVALID_ARGUMENT, 400],
    [403, GrpcStatus.PERMISSION_DENIED, 403],
    [404, GrpcStatus.PERMISSION_DENIED, 404],
    [429, GrpcStatus.PERMISSION_DENIED, 429],
    [500, GrpcStatus.UNAVAILABLE, 503],
    [503, GrpcStatus.UNAVAILABLE, 503],
  ]
  for (const [status, code, clientStatus] of table) {
    answer({
      allow: false,
      status,
      headers: [
        ['content-type', 'application/problem+json'],
        ['set-cookie', 'ogw=; Max-Age=0'],
      ],
      body: `{"status":${status}}`,
    })
    const response = await client.check(checkRequest(HTTP))
    t.equal(response.http_response, 'denied_response', `${status}: denied_response`)
    t.strictSame(
      denied(response),
      {
        code,
        status: clientStatus,
        headers: [
          ['content-type', 'application/problem+json', OVERWRITE],
          ['set-cookie', 'ogw=; Max-Age=0', APPEND],
        ],
        body: `{"status":${status}}`,
      },
      `answer ${status}`,
    )
  }
  answer({ allow: false, status: 302, headers: [['location', 'https://gw.example.com/api/v1/openid/login?rd=x']], body: '' })
  t.strictSame(denied(await client.check(checkRequest(HTTP))).headers, [['location', 'https://gw.example.com/api/v1/openid/login?rd=x', OVERWRITE]])
})

t.test('a request without HTTP attributes, method, path or host: INVALID_ARGUMENT and 400, check not asked', async (t) => {
  const { client, inputs } = await start(t)
  const requests: Array<[string, object]> = [
    ['no attributes', {}],
    ['no request.http', checkRequest(undefined)],
    ['no method', checkRequest({ ...HTTP, method: '' })],
    ['no path', checkRequest({ ...HTTP, path: '' })],
    ['no host', checkRequest({ host: '', method: 'GET', path: '/', scheme: 'https' })],
  ]
  for (const [name, request] of requests) {
    const response = denied(await client.check(request))
    t.equal(response.code, GrpcStatus.INVALID_ARGUMENT, name)
    t.equal(response.status, 400, name)
    t.match(JSON.parse(response.body ?? '') as unknown, { status: 400, code: 'bad_request' }, `${name}: problem+json`)
    t.ok(
      response.headers.some(([key, value]) => key === 'content-type' && value === 'application/problem+json'),
      name,
    )
  }
  t.strictSame(inputs, [])
})

t.test('a check that fails: UNAVAILABLE and 503, the error logged without the headers', async (t) => {
  const { client, answer, logs } = await start(t)
  answer(new Error('session store unreachable'))
  const response = denied(
    await client.check(checkRequest({ ...HTTP, path: '/cb?code=secret-code&x=1', headers: { cookie: SECRET_COOKIE, authorization: 'Bearer secret-token' } })),
  )
  t.equal(response.code, GrpcStatus.UNAVAILABLE)
  t.equal(response.status, 503)
  t.match(JSON.parse(response.body ?? '') as unknown, { status: 503, code: 'internal_error' })
  t.notMatch(response.body, /session store unreachable/, 'the cause stays in the log')
  t.match(logs(), /session store unreachable/)
  t.match(logs(), /"url":"\/cb\?code=\[redacted\]&x=1"/, 'secret query parameters redacted')
  t.notMatch(logs(), /sealed-session-secret|secret-token|secret-code/)
})

t.test('a check that throws synchronously or answers nonsense is a 503 too, and the service keeps answering', async (t) => {
  const { client } = await start(t, {
    check: ((input: CheckInput) => {
      if (input.path === '/throw') throw new Error('sync')
      return Promise.resolve(undefined as unknown as CheckAnswer)
    }) as EnvoyGrpcServerOptions['check'],
  })
  for (const path of ['/throw', '/nonsense']) {
    const response = denied(await client.check(checkRequest({ ...HTTP, path })))
    t.strictSame([response.code, response.status], [GrpcStatus.UNAVAILABLE, 503], path)
  }
})

t.test('bytes that are not a CheckRequest: a gRPC error for that call, the service keeps answering', async (t) => {
  const { client, port } = await start(t)
  const raw = new Client(`127.0.0.1:${port}`, credentials.createInsecure())
  t.teardown(() => raw.close())
  const err = await new Promise<ServiceError | null>((resolve) => {
    raw.makeUnaryRequest(
      '/envoy.service.auth.v3.Authorization/Check',
      () => Buffer.from([0x0a, 0xff, 0xff, 0xff]),
      (b: Buffer) => b,
      {},
      new Metadata(),
      (e: ServiceError | null) => resolve(e),
    )
  })
  t.equal(err?.code, GrpcStatus.INTERNAL)
  t.equal((await client.check(checkRequest(HTTP))).status?.code, 0)
})

t.test('health Check: SERVING when ready, NOT_SERVING otherwise, NOT_FOUND for another service', async (t) => {
  const { client, setReady } = await start(t)
  t.equal(await client.health(''), 'SERVING')
  t.equal(await client.health('envoy.service.auth.v3.Authorization'), 'SERVING')
  setReady(false)
  t.equal(await client.health(''), 'NOT_SERVING')
  t.equal(await client.health('envoy.service.auth.v3.Authorization'), 'NOT_SERVING')
  setReady(new Error('readiness probe failed'))
  t.equal(await client.health(''), 'NOT_SERVING', 'a ready() that throws is not ready')
  const err = await client.health('some.other.Service').then(
    () => undefined,
    (e: ServiceError) => e,
  )
  t.equal(err?.code, GrpcStatus.NOT_FOUND)
})

t.test('health Check awaits an asynchronous ready() asked at the call; a rejection is NOT_SERVING', async (t) => {
  // Readiness asks the session store and Redis (ops/readiness.ts): the answer is the one ready()
  // gives for this call, not one remembered from an earlier look.
  const asked: Array<(ready: boolean) => void> = []
  let rejecting = false
  const { client } = await start(t, {
    ready: () => (rejecting ? Promise.reject(new Error('readiness probe failed')) : new Promise<boolean>((resolve) => asked.push(resolve))),
  })
  const first = client.health('')
  await eventually('the call asks ready()', () => asked.length === 1)
  asked.shift()?.(true)
  t.equal(await first, 'SERVING', 'the answer waits for ready()')
  const second = client.health('')
  await eventually('the next call asks again', () => asked.length === 1)
  asked.shift()?.(false)
  t.equal(await second, 'NOT_SERVING', 'and takes what it says now')
  rejecting = true
  t.equal(await client.health(''), 'NOT_SERVING', 'a ready() that rejects is not ready')
})

t.test('health Watch: the current status, then each change, until cancelled', async (t) => {
  const { client, setReady } = await start(t)
  const watch = client.watch('')
  t.equal(await watch.next(), 'SERVING')
  setReady(false)
  t.equal(await watch.next(), 'NOT_SERVING')
  setReady(true)
  t.equal(await watch.next(), 'SERVING')
  watch.cancel()
  await t.rejects(watch.next(), { code: GrpcStatus.CANCELLED })
  const unknown = client.watch('some.other.Service')
  t.equal(await unknown.next(), 'SERVICE_UNKNOWN', 'the call stays open (health.proto)')
  unknown.cancel()
  const named = client.watch('envoy.service.auth.v3.Authorization')
  t.equal(await named.next(), 'SERVING')
  named.cancel()
})

t.test('close() ends open watches and stops the service', async (t) => {
  const { client, close, port } = await start(t)
  const watch = client.watch('')
  t.equal(await watch.next(), 'SERVING')
  const started = Date.now()
  await close()
  t.ok(Date.now() - started < 2000, 'the watch did not hold the shutdown')
  await t.rejects(watch.next(), 'the watch ended')
  await close()
  t.pass('close() twice')
  const after = grpcClient(`127.0.0.1:${port}`)
  t.teardown(() => after.close())
  await t.rejects(after.check(checkRequest(HTTP)), { code: GrpcStatus.UNAVAILABLE }, 'nothing listens any more')
})

t.test('close() waits for a check under way, then cuts it after its bound', async (t) => {
  let release = (): void => {}
  let entered = (): void => {}
  const checking = new Promise<void>((resolve) => (entered = resolve))
  const { client, close } = await start(t, {
    closeTimeoutMs: 300,
    check: () => {
      entered()
      return new Promise<CheckAnswer>((resolve) => (release = () => resolve(ALLOW)))
    },
  })
  const pending = client.check(checkRequest(HTTP))
  await checking
  const started = Date.now()
  await close()
  t.ok(Date.now() - started >= 250, 'waited for the call')
  await t.rejects(pending, 'the call under way was cut')
  release()
})

t.test('a failed check logs the path as url, redacted by the configured log.redactQueryParams', async (t) => {
  const lines: string[] = []
  const log = pino(loggerOptions({ level: 'info', redactQueryParams: ['ssn'] }), { write: (line: string) => lines.push(line) })
  const { client, answer } = await start(t, { log })
  answer(new Error('store down'))
  await client.check(checkRequest({ ...HTTP, path: '/page?user_ssn=123-45-6789&page=2' }))
  const line = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'ext_authz check failed')
  t.equal(line?.url, '/page?user_ssn=[redacted]&page=2', 'the configured list, not the default one')
  t.notMatch(lines.join(''), '123-45-6789')
})
