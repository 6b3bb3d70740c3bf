import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { RateLimitConfig } from '../options/types.js'
import { queryOf } from './params.js'
import { ENDPOINTS } from '../contract/endpoints.js'
import { hardenSignIn, type RateLimitStore } from './sign-in-hardening.js'
import { acceptFormBodies, FORM_POST_BODY_LIMIT, formPostParams } from './form-post.js'
import { SignInFlow, type AuthorizationResponseInput, type SignInAnswer, type SignInFlowOptions } from './sign-in-flow.js'
import { Handoff } from './handoff.js'
import type { JtiReplay } from '../oidc/jti-replay.js'

// The four sign-in endpoints of the contract (contract/endpoints.ts), and the sign-out form of
// the gateway's pages, as Fastify routes: each reads its request, hands it to the sign-in flow
// (sign-in-flow.ts, which owns every step and refusal) and writes the answer. What is the web
// framework's stays here: the body limits, the rate limit and security headers
// (sign-in-hardening.ts), and reading the query (params.ts) or form body (form-post.ts).

/**
 * The largest body these endpoints read (none needs one; a DELETE or POST may still carry one):
 * beyond it 413, where Fastify's default would read a megabyte.
 */
const BODY_LIMIT_BYTES = 16 * 1024
/** The sign-out form has no fields: whatever body comes is ignored, and a large one refused. */
const SIGN_OUT_BODY_LIMIT_BYTES = 1024

export interface SignInOptions extends SignInFlowOptions {
  /** Per-client budget of the redirect, callback and refresh endpoints. */
  rateLimit: RateLimitConfig['signIn']
  /** A @fastify/rate-limit store class shared by processes (server.workers); per process otherwise. */
  rateLimitStore?: RateLimitStore
  /** One-time use of hand-off tokens (routes/handoff.ts): the process's guard, in Redis when configured. */
  replay: JtiReplay
  /** session.maxAgeSeconds: a handed-over session's cookies live as long as the session. */
  sessionMaxAgeSeconds: number
  /** The gateway's time in epoch seconds. */
  nowSeconds: () => number
  /** Callback paths outside the contract's (a provider's redirectPath; oidc/providers.ts Providers.ownCallbackPaths). */
  ownCallbackPaths?: readonly string[]
}

/** Writes the flow's answer: a redirect, or the JSON `{ value }`. */
function write(reply: FastifyReply, answer: SignInAnswer): FastifyReply | { value: string } {
  if (answer.noStore) reply.header('cache-control', 'no-store').header('pragma', 'no-cache')
  return answer.redirect === undefined ? { value: answer.value } : reply.redirect(answer.redirect, answer.status)
}

/** The authorization response of a callback: GET carries it in the query, POST in a form body (provider.responseMode: form_post). */
function authorizationResponse(req: FastifyRequest): AuthorizationResponseInput {
  return req.method === 'POST' ? { received: 'form_post', params: () => formPostParams(req) } : { received: 'query', params: () => queryOf(req) }
}

export async function signInRoutes(app: FastifyInstance, options: SignInOptions): Promise<void> {
  const handoff = new Handoff({
    cookies: options.cookies,
    store: options.store,
    bindIssuer: options.bindIssuer,
    replay: options.replay,
    publicUrl: options.publicUrl,
    validateRedirectAfter: options.validateRedirectAfter,
    sessionMaxAgeSeconds: options.sessionMaxAgeSeconds,
    nowSeconds: options.nowSeconds,
  })
  const flow = new SignInFlow({ ...options, handoff })
  app.addHook('onRoute', (route) => {
    route.bodyLimit ??= BODY_LIMIT_BYTES
  })
  await hardenSignIn(app, options.rateLimit, options.rateLimitStore, options.ownCallbackPaths)
  // The form-post callback and the sign-out form (routes/form-post.ts).
  acceptFormBodies(app)

  app.get(ENDPOINTS.redirect.path, async (req, reply) => write(reply, await flow.start(req, reply, queryOf(req))))

  // One handler for the single provider's path and for each provider's own (contract/endpoints.ts
  // callbackPath).
  const callback = async (req: FastifyRequest, reply: FastifyReply): Promise<unknown> => write(reply, await flow.finish(req, reply, authorizationResponse(req)))
  app.get(ENDPOINTS.callback.path, callback)
  app.get(ENDPOINTS.providerCallback.path, callback)
  app.post(ENDPOINTS.callback.path, { bodyLimit: FORM_POST_BODY_LIMIT }, callback)
  app.post(ENDPOINTS.providerCallback.path, { bodyLimit: FORM_POST_BODY_LIMIT }, callback)
  for (const path of options.ownCallbackPaths ?? []) {
    app.get(path, callback)
    app.post(path, { bodyLimit: FORM_POST_BODY_LIMIT }, callback)
  }

  // Several cookie domains: one sign-in handed to a host of another domain (routes/handoff.ts).
  // Its URLs carry one-time seals: never kept, never sent on as a Referer.
  app.get(ENDPOINTS.handoff.path, async (req, reply) => {
    reply.header('referrer-policy', 'no-referrer')
    return write(reply, await handoff.step(req, reply, queryOf(req)))
  })

  app.get(ENDPOINTS.refresh.path, async (req, reply) => write(reply, await flow.refresh(req, reply, queryOf(req))))
  app.delete(ENDPOINTS.logout.path, async (req, reply) => write(reply, await flow.logout(req, reply)))
  app.post(ENDPOINTS.signOut.path, { bodyLimit: SIGN_OUT_BODY_LIMIT_BYTES }, async (req, reply) =>
    write(reply, await flow.signOut(req, reply, req.headers.origin)),
  )
}
