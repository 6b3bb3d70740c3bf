import type { GatewayConfig } from '../options/types.js'
import { Answers } from '../access/answer.js'
import { Checker } from '../access/checker.js'
import { AccessDecisions, type StepUpJudge } from '../access/decision.js'
import { createUpstreamMatcher, type UpstreamMatcher } from '../access/match.js'
import type { UrlRedactor } from '../ops/logging.js'
import { SocketAccess } from '../proxy/websocket-access.js'
import { createRedirectAfterValidator, createTrustedOriginTest, type RedirectAfterValidator, type TrustedOriginTest } from '../routes/redirect-after.js'
import { UpstreamCredentials, assertionSigner, transactionTokenMinting } from '../upstream/credentials.js'
import type { IdentityAssertions } from '../upstream/identity-assertion.js'
import { createTrustCheck, type TrustCheck } from '../ops/trusted-peers.js'
import { createTokenExchanger } from '../upstream/token-exchange.js'
import type { ProcessState } from './state.js'
import type { SessionsFeature } from './sessions.js'

// The access feature of one configuration: each upstream's access decision, the one answer of a
// verdict with what the upstream receives, the check endpoints' Checker, and the open-WebSocket
// verdict. The proxy guard, every check dialect and the WebSocket registry ask these, so a
// request gets the same answer at every exit. What derives from a session (the decision cache,
// the exchanged tokens, the open WebSockets) forgets it when the sessions feature says it ended.

export interface AccessFeature {
  readonly access: AccessDecisions
  /** What step-up rules' auth_time is judged by: the gateway's clock and each provider's tolerance (the callback asks it too). */
  readonly judge: StepUpJudge
  readonly answers: Answers
  readonly checker: Checker
  readonly credentials: UpstreamCredentials
  /** The identity assertions' signer, when keys are configured: its JWKS is published. */
  readonly signer: IdentityAssertions | undefined
  readonly socketAccess: SocketAccess
  /** The host and longest prefix's upstream. */
  readonly matchUpstream: UpstreamMatcher
  /** routes/redirect-after.ts's rule for coming back after a sign-in. */
  readonly validateRedirectAfter: RedirectAfterValidator
  /** Whether a page of this origin belongs to the application (WebSocket Origin, sign-out form). */
  readonly isTrustedOrigin: TrustedOriginTest
  /** server.trustedProxies' test. */
  readonly isTrustedProxy: TrustCheck
}

export async function buildAccess(config: GatewayConfig, state: ProcessState, sessions: SessionsFeature, redactUrl: UrlRedactor): Promise<AccessFeature> {
  const { publicUrl } = config.server
  const { providers, cookies } = sessions
  // Step-up rules' auth_time is judged by the gateway's clock and each provider's tolerance.
  const judge: StepUpJudge = {
    nowSeconds: () => Math.floor(state.clock.now() / 1000),
    toleranceSeconds: (name) => providers.get(name)?.config.clockToleranceSeconds ?? 0,
  }
  const access = new AccessDecisions(config.upstreams, sessions.authentication, judge, publicUrl)
  const redirects = { publicUrl, allowedHosts: config.redirects.allowedHosts }
  const validateRedirectAfter = createRedirectAfterValidator(redirects)
  // RFC 8693 exchanges for upstreams with tokenExchange, shared by every exit.
  const exchanger = createTokenExchanger({ providers, clock: state.clock, upstreams: config.upstreams })
  const signer = await assertionSigner(config)
  const credentials = new UpstreamCredentials({
    upstreams: config.upstreams,
    assertions: { header: config.assertions.header, signer },
    transactionTokens: transactionTokenMinting(config, signer),
    exchanger,
    isGatewayCookie: cookies.isGatewayCookie,
  })
  const answers = new Answers({ publicUrl, validateRedirectAfter, credentials })
  const checker = new Checker({
    upstreams: config.upstreams,
    access,
    answers,
    publicUrl,
    cookieDomains: config.cookies.domain === undefined ? (config.cookies.domains ?? []) : [config.cookies.domain],
    cache: config.forwardAuth.cache,
    isGatewayCookieName: cookies.isGatewayCookieName,
    clock: state.clock,
    redactUrl,
    ownCallbackPaths: sessions.providers.ownCallbackPaths,
  })
  const matchUpstream = createUpstreamMatcher(config.upstreams)
  // Open WebSockets outlive a reload: the registry is the process's; each configuration gives it
  // its verdict, applied once that configuration serves (by the caller: runtime/live.ts).
  const socketAccess = new SocketAccess({
    store: sessions.store,
    matchUpstream,
    websocket: config.websocket,
    sessionMaxAgeSeconds: config.session.maxAgeSeconds,
    access,
    issuerOf: (name: string) => providers.get(name)?.config.issuer,
    revocations: state.revocations,
  })
  const { websockets } = state
  sessions.events.subscribe({
    sessionEnded(session) {
      checker.forget()
      exchanger.forgetToken(session.provider, session.accessToken)
      websockets.endSession(session.id)
    },
    sessionsEnded(selector, at) {
      checker.forget()
      exchanger.forget()
      websockets.endSelected(selector, at)
    },
    // Exchanged tokens carry the claims of their time: a claims change drops them too.
    claimsChanged() {
      checker.forget()
      exchanger.forget()
    },
  })
  return {
    access,
    judge,
    answers,
    checker,
    credentials,
    signer,
    socketAccess,
    matchUpstream,
    validateRedirectAfter,
    isTrustedOrigin: createTrustedOriginTest(redirects),
    isTrustedProxy: createTrustCheck(config.server.trustedProxies),
  }
}
