import t from 'tap'
import { checkResponse, GrpcCode, HeaderAppendAction, headerMutations, refusalOf } from '#src/checks/envoy-grpc/check-response'

// The pure mapping from the gateway's answer to Envoy's CheckResponse: every refusal status of
// the table, the fail-closed rules around it, and the append actions that decide whether
// a client's forged header survives and whether several Set-Cookie all reach the client.

const { OVERWRITE_IF_EXISTS_OR_ADD: OVERWRITE, APPEND_IF_EXISTS_OR_ADD: APPEND } = HeaderAppendAction

t.test('each refusal status: its gRPC code and the status the client gets', async (t) => {
  // [answer status, gRPC code, client status, answer's headers and body kept]
  const table: Array<[number, GrpcCode, number, boolean]> = [
    [302, GrpcCode.UNAUTHENTICATED, 302, true],
    [401, GrpcCode.UNAUTHENTICATED, 401, true],
    [400, GrpcCode.INVALID_ARGUMENT, 400, true],
    [403, GrpcCode.PERMISSION_DENIED, 403, true],
    [404, GrpcCode.PERMISSION_DENIED, 404, true],
    // Other 4xx: refusals of this request.
    [405, GrpcCode.PERMISSION_DENIED, 405, true],
    [409, GrpcCode.PERMISSION_DENIED, 409, true],
    [429, GrpcCode.PERMISSION_DENIED, 429, true],
    [499, GrpcCode.PERMISSION_DENIED, 499, true],
    // Other 3xx: redirects before access.
    [303, GrpcCode.UNAUTHENTICATED, 303, true],
    [307, GrpcCode.UNAUTHENTICATED, 307, true],
    // 5xx: unavailable, always 503 to the client.
    [500, GrpcCode.UNAVAILABLE, 503, true],
    [502, GrpcCode.UNAVAILABLE, 503, true],
    [503, GrpcCode.UNAVAILABLE, 503, true],
    [504, GrpcCode.UNAVAILABLE, 503, true],
    [599, GrpcCode.UNAVAILABLE, 503, true],
    // Not a refusal at all: a bug, answered 503 without the answer's headers and body.
    [200, GrpcCode.UNAVAILABLE, 503, false],
    [204, GrpcCode.UNAVAILABLE, 503, false],
    [299, GrpcCode.UNAVAILABLE, 503, false],
    [101, GrpcCode.UNAVAILABLE, 503, false],
    [0, GrpcCode.UNAVAILABLE, 503, false],
    [-401, GrpcCode.UNAVAILABLE, 503, false],
    [600, GrpcCode.UNAVAILABLE, 503, false],
    [401.5, GrpcCode.UNAVAILABLE, 503, false],
    [Number.NaN, GrpcCode.UNAVAILABLE, 503, false],
    [Number.POSITIVE_INFINITY, GrpcCode.UNAVAILABLE, 503, false],
  ]
  for (const [status, code, clientStatus, keepsContent] of table) {
    t.strictSame(refusalOf(status), { code, status: clientStatus, keepsContent }, `refusalOf(${status})`)
    const response = checkResponse({ allow: false, status, headers: [['content-type', 'application/problem+json']], body: '{"code":"x"}' })
    t.strictSame(
      response,
      {
        status: { code, message: keepsContent ? `HTTP ${status}` : `not a refusal status: ${status}` },
        denied_response: {
          status: { code: clientStatus },
          headers: keepsContent ? [{ header: { key: 'content-type', value: 'application/problem+json' }, append_action: OVERWRITE }] : [],
          body: keepsContent ? '{"code":"x"}' : '',
        },
      },
      `checkResponse with status ${status}`,
    )
    t.not(response.status.code, GrpcCode.OK, `status ${status} never allows`)
  }
})

t.test('allow: code OK, upstream headers overwrite, removals, response headers', async (t) => {
  t.strictSame(
    checkResponse({
      allow: true,
      upstreamHeaders: [
        ['X-Forwarded-User', 'alice'],
        ['x-forwarded-email', 'alice@example.com'],
        ['cookie', 'app=1'],
      ],
      removeHeaders: ['x-forwarded-groups', 'authorization'],
      responseHeaders: [['Set-Cookie', 'ogw=new; Path=/; HttpOnly']],
    }),
    {
      status: { code: GrpcCode.OK, message: '' },
      ok_response: {
        headers: [
          { header: { key: 'X-Forwarded-User', value: 'alice' }, append_action: OVERWRITE },
          { header: { key: 'x-forwarded-email', value: 'alice@example.com' }, append_action: OVERWRITE },
          { header: { key: 'cookie', value: 'app=1' }, append_action: OVERWRITE },
        ],
        headers_to_remove: ['x-forwarded-groups', 'authorization'],
        response_headers_to_add: [{ header: { key: 'Set-Cookie', value: 'ogw=new; Path=/; HttpOnly' }, append_action: APPEND }],
      },
    },
  )
  t.strictSame(checkResponse({ allow: true, upstreamHeaders: [], removeHeaders: [], responseHeaders: [] }), {
    status: { code: GrpcCode.OK, message: '' },
    ok_response: { headers: [], headers_to_remove: [], response_headers_to_add: [] },
  })
})

t.test('every Set-Cookie appends, whatever its case and wherever it goes', async (t) => {
  const cookies: Array<[string, string]> = [
    ['set-cookie', 'ogw=a; Path=/'],
    ['Set-Cookie', 'ogw.1=b; Path=/'],
    ['SET-COOKIE', 'ogw.2=; Max-Age=0'],
  ]
  const allowed = checkResponse({ allow: true, upstreamHeaders: [], removeHeaders: [], responseHeaders: cookies })
  t.ok('ok_response' in allowed)
  if (!('ok_response' in allowed)) return
  t.strictSame(
    allowed.ok_response.response_headers_to_add.map((h) => h.append_action),
    [APPEND, APPEND, APPEND],
    "the first too: the upstream's own Set-Cookie stay",
  )
  t.strictSame(
    allowed.ok_response.response_headers_to_add.map((h) => h.header),
    cookies.map(([key, value]) => ({ key, value })),
    'in order, names and values unchanged',
  )
  const denied = checkResponse({ allow: false, status: 302, headers: [['location', 'https://gw/sign-in'], ...cookies], body: '' })
  t.ok('denied_response' in denied)
  if (!('denied_response' in denied)) return
  t.strictSame(
    denied.denied_response.headers.map((h) => [h.header.key, h.append_action]),
    [
      ['location', OVERWRITE],
      ['set-cookie', APPEND],
      ['Set-Cookie', APPEND],
      ['SET-COOKIE', APPEND],
    ],
  )
})

t.test('another repeated name overwrites first, then appends', async (t) => {
  t.strictSame(
    headerMutations([
      ['X-Forwarded-Groups', 'a'],
      ['x-forwarded-groups', 'b'],
      ['x-forwarded-user', 'alice'],
      ['X-FORWARDED-GROUPS', 'c'],
    ]).map((h) => [h.header.key, h.header.value, h.append_action]),
    [
      ['X-Forwarded-Groups', 'a', OVERWRITE],
      ['x-forwarded-groups', 'b', APPEND],
      ['x-forwarded-user', 'alice', OVERWRITE],
      ['X-FORWARDED-GROUPS', 'c', APPEND],
    ],
  )
  t.strictSame(headerMutations([]), [])
})

t.test('the response never carries the deprecated append field', async (t) => {
  const all = [
    checkResponse({ allow: true, upstreamHeaders: [['a', '1']], removeHeaders: [], responseHeaders: [['set-cookie', 'x=1']] }),
    checkResponse({ allow: false, status: 401, headers: [['www-authenticate', 'Bearer']], body: '' }),
  ]
  t.notMatch(JSON.stringify(all), /"append"/, 'Envoy would give it precedence and join Set-Cookie into one line')
})

t.test('the answer is copied, not shared', async (t) => {
  const removeHeaders = ['authorization']
  const response = checkResponse({ allow: true, upstreamHeaders: [], removeHeaders, responseHeaders: [] })
  removeHeaders.push('cookie')
  t.ok('ok_response' in response && response.ok_response.headers_to_remove.length === 1)
})
