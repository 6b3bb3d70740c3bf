import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyBaseLogger, FastifyError, FastifyReply, FastifyRequest } from 'fastify'
import { GatewayError, ID_TOKEN_CLOCK_SKEW, MISCONFIGURED_ISSUER, NOT_READY_PROVIDER_UNREACHABLE, type ProblemCode } from '../contract/errors.js'
import { PROBLEM_HEADERS } from '../ops/response-headers.js'
import { escapeHtml } from '../lib/html.js'
import { isNavigation } from '../contract/navigation.js'
import { FORWARD_AUTH_PATH, isGatewayPath, SIGN_OUT_PATH, signInPath } from '../contract/endpoints.js'
import type { SessionStore } from '../session/types.js'
import { actions, pageHeaders, renderPage } from './page.js'
import { signedInAs, type WhoRequest } from './who.js'

// The HTML face of a gateway error, for browser navigations only (the error handler, answerErrors
// below, decides; everything else keeps problem+json). Same status, same code, the same headers the
// error carries (Retry-After, Allow, WWW-Authenticate), plus what happened in plain words, who
// is signed in, and the way on: sign in (again), or sign out to switch account.

export interface PageDeps {
  publicUrl: string
  store: SessionStore
  /** Returns the safe redirect target or `null` (routes/redirect-after.ts). */
  validateRedirectAfter: (value: string) => string | null
  /** Each provider's end-session URL without a hint, or '' (the sign-out form's redirect goes to one). */
  endSessionUrls: () => string[]
}

/**
 * A page rather than problem+json: a browser navigation, except forward-auth, whose caller is an
 * ingress that forwards the browser's headers but reads only the status (ingress-nginx) or passes
 * the body on as it is (Traefik), like oauth2-proxy's auth endpoint.
 */
export function wantsPage(req: FastifyRequest): boolean {
  return isNavigation(req) && req.routeOptions.url !== FORWARD_AUTH_PATH
}

/** Heading and explanation per code: a new code cannot be added without its words. */
const WORDS: Record<ProblemCode, [heading: string, text: string]> = {
  bad_request: ['The request could not be understood', 'The address or one of its parameters is malformed.'],
  code_missing: ['The sign-in did not finish', 'The identity provider sent you back without signing you in.'],
  state_mismatch: [
    'This sign-in link is no longer valid',
    'A sign-in link works once, for 10 minutes, in the browser that started it. This one is old, already used, or from another browser. Start a new sign-in.',
  ],
  code_invalid: ['The identity provider refused this sign-in', 'The one-time sign-in code was already used or has expired. Start a new sign-in.'],
  id_token_invalid: [
    'The sign-in could not be verified',
    "The identity provider's answer failed a security check. Try again; if it keeps happening, tell the administrator (the gateway's log names the check).",
  ],
  authorization_response_invalid: [
    'The sign-in could not be verified',
    "The answer came back from another identity provider than the one this sign-in was started with. Start a new sign-in; if it keeps happening, tell the administrator (the gateway's log names the rule).",
  ],
  refresh_token_missing: ['There is no sign-in to renew', 'Sign in to continue.'],
  refresh_token_invalid: ['Your sign-in has ended', 'The identity provider no longer accepts it. Sign in again to continue.'],
  unauthenticated: ['You are not signed in', 'Sign in to continue.'],
  forbidden: [
    'Your account may not use this application',
    'You are signed in, but this application admits only some accounts. Sign in with another account, or ask the administrator for access.',
  ],
  token_exchange_refused: [
    'This application cannot be reached with your sign-in',
    "You are signed in, but the identity provider would not issue this application's token for your account. Ask the administrator, quoting the request id below.",
  ],
  insufficient_user_authentication: [
    'This page needs a stronger sign-in',
    'You are signed in, but this part of the application asks you to sign in again, with a second factor or more recently. Sign in again to continue.',
  ],
  step_up_failed: [
    'The stronger sign-in did not happen',
    "This part of the application needs a stronger or more recent sign-in, and the identity provider did not provide it. Try again; if it keeps happening, tell the administrator (the gateway's log says what was missing).",
  ],
  not_found: ['There is nothing at this address', 'No application is served here. Check the address.'],
  method_not_allowed: ['This address does not take this kind of request', 'Go back to the application and try again from there.'],
  rate_limited: ['Too many sign-in attempts', 'Wait a minute, then try again.'],
  session_too_large: [
    'Your sign-in is too large to keep',
    "The identity provider's tokens do not fit in cookies. The administrator needs to configure a server-side session store.",
  ],
  provider_unavailable: ['The identity provider cannot be reached', 'Signing in is not possible right now. Try again in a moment.'],
  provider_rejected_client: [
    'Signing in is misconfigured',
    "The identity provider refused this gateway's own credentials: the gateway's provider settings are wrong. Trying again will not help; tell the administrator, quoting the request id below.",
  ],
  provider_rejected_redirect_uri: [
    'Signing in is misconfigured',
    'The identity provider does not accept the address this gateway asks it to send you back to (its redirect URI, below): that address must be registered at the identity provider for this gateway. Trying again will not help; tell the administrator, quoting the request id below.',
  ],
  upstream_unavailable: ['The application cannot be reached', 'Try again in a moment.'],
  not_ready: ['The gateway is starting', 'Try again in a moment.'],
  provider_misconfigured: [
    'The gateway is misconfigured',
    "The identity provider answers, but its settings do not match the gateway's (below), so nobody can sign in. Trying again will not help; tell the administrator, quoting the request id below.",
  ],
  session_store_unavailable: ['Sign-ins cannot be read right now', 'Try again in a moment.'],
  decision_unavailable: ['This request cannot be checked right now', 'The sign-in service is not answering. Try again in a moment.'],
  upstream_timeout: ['The application did not answer in time', 'Try again in a moment.'],
  internal_error: ['Something went wrong in the gateway', 'Try again; if it keeps happening, tell the administrator.'],
}

/** A not_ready past provider.notReadyPageAfterMs: no longer "starting" (oidc/client.ts #require). */
const PROVIDER_UNREACHABLE: [heading: string, text: string] = [
  'The identity provider cannot be reached',
  'The gateway has not been able to reach its identity provider for a while, so nobody can sign in. Try again later; if it lasts, tell the administrator, quoting the request id below.',
]

/** A provider_misconfigured whose provider names another issuer (oidc/client.ts #misconfiguration). */
const ISSUER_MISMATCH: [heading: string, text: string] = [
  'The gateway is misconfigured',
  'The identity provider names another issuer than the one the gateway is set up for (below), so nobody can sign in. Trying again will not help; tell the administrator, quoting the request id below.',
]

/** A refused ID token whose times disagree with the gateway's clock (oidc/clock-skew.ts). */
const CLOCK_SKEW: [heading: string, text: string] = [
  'The sign-in could not be verified',
  "The identity provider's clock and the gateway's disagree, so its answer looks expired or issued in the future. Trying again will not help; tell the administrator (the gateway's log gives the measured offset).",
]

const MISCONFIGURED: [heading: string, text: string] = [
  'Signing in is misconfigured',
  'The identity provider refused the sign-in request this gateway sent. Trying again will not help; tell the administrator what the identity provider answered (below).',
]

/**
 * The provider's `error` on a callback without a code, in words: RFC 6749 4.1.2.1 and OpenID
 * Connect Core 3.1.2.6. A person who cancelled reads that they cancelled; a request the provider
 * refuses is the operator's to fix; any other value keeps code_missing's words.
 */
export const PROVIDER_ERROR_WORDS: Readonly<Record<string, [heading: string, text: string]>> = {
  access_denied: [
    'The sign-in was cancelled',
    'The sign-in was cancelled at the identity provider, or the provider did not let your account through. To try again, use the button below; for access, ask the administrator.',
  ],
  invalid_request: MISCONFIGURED,
  unauthorized_client: MISCONFIGURED,
  unsupported_response_type: MISCONFIGURED,
  invalid_scope: MISCONFIGURED,
  server_error: [
    'The identity provider failed',
    'An error at the identity provider stopped the sign-in. Try again in a moment; if it keeps happening, tell the administrator.',
  ],
  temporarily_unavailable: ['The identity provider is busy', 'The identity provider could not handle the sign-in right now. Try again in a moment.'],
  interaction_required: [
    'The identity provider needs you',
    'The identity provider needs you to do something on its pages before you can sign in. Sign in again to continue.',
  ],
  login_required: ['Sign in at the identity provider', 'You are not signed in at the identity provider. Sign in again to continue.'],
  account_selection_required: ['Choose an account', 'The identity provider needs you to choose which account to sign in with. Sign in again to continue.'],
  consent_required: [
    'The identity provider needs your consent',
    'You have not yet allowed this application what it asks for at the identity provider. Sign in again and allow it, or ask the administrator.',
  ],
  invalid_request_uri: MISCONFIGURED,
  invalid_request_object: MISCONFIGURED,
  request_not_supported: MISCONFIGURED,
  request_uri_not_supported: MISCONFIGURED,
  registration_not_supported: MISCONFIGURED,
}

/** A 403 of a per-path rule (access/decision.ts forbiddenError): the part refused, not the whole application. */
function refusedPartWords(path: string): [heading: string, text: string] {
  return [
    'Your account may not use this part of the application',
    `You are signed in, but ${path} (and every page under it) admits only some accounts; the rest of the application may be open to you. Sign in with another account, or ask the administrator for access.`,
  ]
}

function wordsOf(problem: GatewayError): [heading: string, text: string] {
  if (problem.code === 'forbidden' && typeof problem.extensions.refusedPath === 'string') return refusedPartWords(problem.extensions.refusedPath)
  if (problem.code === 'not_ready' && problem.extensions.reason === NOT_READY_PROVIDER_UNREACHABLE) return PROVIDER_UNREACHABLE
  if (problem.code === 'provider_misconfigured' && problem.extensions.reason === MISCONFIGURED_ISSUER) return ISSUER_MISMATCH
  if (problem.code === 'id_token_invalid' && problem.extensions.reason === ID_TOKEN_CLOCK_SKEW) return CLOCK_SKEW
  const error = problem.code === 'code_missing' ? problem.extensions.error : undefined
  if (typeof error === 'string' && Object.hasOwn(PROVIDER_ERROR_WORDS, error)) return PROVIDER_ERROR_WORDS[error] as [string, string]
  return WORDS[problem.code]
}

/** The provider's own words on a callback that carries no code (RFC 6749 4.1.2.1), escaped. */
function providerAnswer(problem: GatewayError): string {
  if (problem.code !== 'code_missing') return ''
  const error = problem.extensions.error
  if (typeof error !== 'string') return ''
  const description = problem.extensions.error_description
  const said = typeof description === 'string' && description !== '' ? `: ${escapeHtml(description)}` : ''
  return `<p>The identity provider answered <code>${escapeHtml(error)}</code>${said}.</p>`
}

/**
 * A page that answers "not yet" reloads itself after the error's Retry-After (RFC 9110 10.2.3),
 * a number of seconds: the starting page then turns into the page asked for, without a person
 * pressing reload. No script: a `refresh` meta element, which the page's CSP does not govern.
 */
function refreshOf(problem: GatewayError): number | undefined {
  if (problem.code !== 'not_ready') return undefined
  const after = problem.headers['retry-after']
  return after !== undefined && /^\d{1,4}$/.test(after) ? Number(after) : undefined
}

/** Where a page's sign-out form may go: the gateway, and the providers' end-sessions it redirects to. */
export function formTargetsOf(deps: PageDeps): string[] {
  const origin = new URL(deps.publicUrl).origin
  const origins = deps.endSessionUrls().flatMap((url) => (url === '' ? [] : [new URL(url).origin]))
  return [...new Set([origin, ...origins])]
}

/** A request refused: the page for it says who is signed in and leads back to `url`. */
export interface ProblemRequest extends WhoRequest {
  /** The request's id (Fastify's req.id, `reqId` in the log), when it has one. */
  readonly id?: string
  readonly method: string
  readonly headers: IncomingHttpHeaders
}

/** A refusal as it is answered: status, headers (content type included) and body. */
export interface ProblemAnswer {
  status: number
  headers: Record<string, string>
  body: string
}

/** An error page's headers (the error's own among them) and HTML. */
export interface ErrorPage {
  headers: Record<string, string>
  html: string
}

function pathOf(url: string): string {
  const q = url.indexOf('?')
  return q === -1 ? url : url.slice(0, q)
}

export function createErrorPage(deps: PageDeps) {
  const signOutUrl = deps.publicUrl + SIGN_OUT_PATH

  /** Back to this page after signing in, unless it is a gateway path (then the site's root). */
  function signInUrl(req: WhoRequest, problem: GatewayError): string {
    const given = problem.extensions.signInUrl
    if (typeof given === 'string') return given
    const target = isGatewayPath(pathOf(req.url)) ? '/' : (deps.validateRedirectAfter(req.url) ?? '/')
    return deps.publicUrl + signInPath(target)
  }

  /** `req.url`: the page a browser asked for (a check's is the request checked), where signing in returns. */
  return async function errorPage(req: WhoRequest, problem: GatewayError, status: number): Promise<ErrorPage> {
    const who = await signedInAs(req, deps.store)
    const [heading, text] = wordsOf(problem)
    const requestId = problem.extensions.requestId
    const whoLine =
      who === undefined
        ? '<p class="who">You are not signed in.</p>'
        : `<p class="who">Signed in as <strong>${escapeHtml(who.name)}</strong>${who.email === undefined || who.email === who.name ? '' : ` (${escapeHtml(who.email)})`}.</p>`
    const body = [
      `<p class="code">Error ${status} · ${escapeHtml(problem.code)}</p>`,
      `<h1>${escapeHtml(heading)}</h1>`,
      `<p>${escapeHtml(text)}</p>`,
      providerAnswer(problem),
      `<p class="detail">${escapeHtml(problem.message)}</p>`,
      typeof requestId === 'string' ? `<p class="detail">Request id: <code>${escapeHtml(requestId)}</code></p>` : '',
      whoLine,
      actions(signInUrl(req, problem), who === undefined ? 'Sign in' : 'Sign in again', who === undefined ? undefined : signOutUrl),
    ].join('\n')
    return {
      headers: { ...problem.headers, ...pageHeaders({ formTargets: formTargetsOf(deps) }) },
      html: renderPage(`${heading} (${status})`, body, refreshOf(problem)),
    }
  }
}

/**
 * The answer to a refused request, whichever way it travels (the app's error handler, the gRPC
 * check): the page (`page`) or RFC 9457 problem+json, with the error's own headers. A 5xx is
 * logged as a warning with its cause, unless the failure was logged where it happened (one line
 * per refusal), and answered with the request's id (`requestId`), which the log lines carry as
 * `reqId`: what a user quotes to the operator.
 */
export function createProblemAnswer(errorPage: ReturnType<typeof createErrorPage>) {
  return async function answerProblem(req: ProblemRequest, log: FastifyBaseLogger, given: GatewayError, status: number, page: boolean): Promise<ProblemAnswer> {
    const problem = given.status >= 500 && typeof req.id === 'string' ? withRequestId(given, req.id) : given
    if (problem.status >= 500 && !problem.logged) log.warn({ code: problem.code, cause: causeOf(problem) }, problem.message)
    if (page) {
      const rendered = await errorPage(req, problem, status)
      return { status, headers: rendered.headers, body: rendered.html }
    }
    return {
      status,
      headers: { ...PROBLEM_HEADERS, ...problem.headers, 'content-type': 'application/problem+json; charset=utf-8' },
      body: JSON.stringify({ ...problem.toProblem(), status }),
    }
  }
}

function withRequestId(problem: GatewayError, requestId: string): GatewayError {
  return new GatewayError(problem.code, problem.message, {
    cause: problem.cause,
    extensions: { ...problem.extensions, requestId },
    headers: problem.headers,
    logged: problem.logged,
  })
}

function causeOf(err: Error): string | undefined {
  const cause = err.cause
  return cause instanceof Error ? `${cause.name}: ${cause.message}` : undefined
}

/** The answer of a problem, as a page or problem+json (createProblemAnswer). */
export type ProblemAnswerer = ReturnType<typeof createProblemAnswer>

/**
 * The gateway's error handler: every error a route throws, or Fastify raises, answered with
 * `answerProblem`: a page for a browser navigation (wantsPage), problem+json for programs, and
 * its code on the reply for the metrics (`reply.problemCode`). A 4xx of Fastify's own (a malformed
 * body, an unsupported content type) is `bad_request`; anything else unexpected is logged and
 * answered `internal_error`, without its message.
 */
export function answerErrors(answerProblem: ProblemAnswerer) {
  return function answerError(err: FastifyError | GatewayError, req: FastifyRequest, reply: FastifyReply): Promise<unknown> {
    let problem: GatewayError
    if (err instanceof GatewayError) {
      problem = err
    } else if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
      problem = new GatewayError('bad_request', 'the request is malformed')
    } else {
      req.log.error({ err: { name: err.name, message: err.message, code: err.code } }, 'unexpected error')
      problem = new GatewayError('internal_error', 'the gateway failed unexpectedly; the log has details')
    }
    const status = err instanceof GatewayError ? problem.status : (err.statusCode ?? problem.status)
    reply.problemCode = problem.code
    // Pages for people, JSON for programs: a browser navigation gets the same error as a page.
    return answerProblem(req, req.log, problem, status, wantsPage(req)).then((answer) => reply.code(answer.status).headers(answer.headers).send(answer.body))
  }
}

/** The not-found handler: a path no route and no upstream serves (404 `not_found`, answered by answerErrors). */
export function noUpstreamServes(): never {
  throw new GatewayError('not_found', 'no upstream serves this path')
}
