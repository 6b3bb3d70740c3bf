import type { FastifyInstance } from 'fastify'
import { escapeHtml } from '../lib/html.js'
import { PROVIDER_NOT_TOLD, SIGN_OUT_PATH, signInPath } from '../contract/endpoints.js'
import { formTargetsOf, type PageDeps } from './error-page.js'
import { actions, renderPage, sendPage } from './page.js'
import { signedInAs } from './who.js'

// GET /api/v1/openid/sign-out: the sign-out page. Signed in, it offers the sign-out button (its
// form is POST on the same path, in routes/sign-in-flow.ts); signed out, it says so. It is where a
// sign-out ends: the form's redirect when the provider has no end-session endpoint, and the
// provider's post-logout redirect when `provider.postLogoutRedirectUri` points here, and where a
// sign-out ends when the provider is down (`?provider=unreachable`: it could not be told).

/** The sign-out ended here only (routes/sign-in-flow.ts): the query says so. Anyone may write it: it only adds a notice. */
function notTold(url: string): boolean {
  const q = url.indexOf('?')
  return q !== -1 && new URLSearchParams(url.slice(q + 1)).toString() === PROVIDER_NOT_TOLD
}

export async function signOutPage(app: FastifyInstance, deps: PageDeps): Promise<void> {
  app.get(SIGN_OUT_PATH, async (req, reply) => {
    const who = await signedInAs(req, deps.store)
    const body =
      who === undefined
        ? [
            '<h1>You are signed out</h1>',
            '<p>Your sign-in to this site has ended. If your identity provider still remembers you, signing in again may not ask for a password.</p>',
            notTold(req.url)
              ? '<p><strong>The identity provider could not be told</strong>: it cannot be reached right now. Your sign-in there may still be active; to end it too, sign out at the identity provider once it is back, or close the browser.</p>'
              : '',
            actions(deps.publicUrl + signInPath('/'), 'Sign in again', undefined),
          ]
        : [
            '<h1>Sign out</h1>',
            `<p class="who">Signed in as <strong>${escapeHtml(who.name)}</strong>.</p>`,
            actions(`${deps.publicUrl}/`, 'Stay signed in', deps.publicUrl + SIGN_OUT_PATH),
          ]
    return sendPage(reply, 200, { formTargets: formTargetsOf(deps) }, renderPage(who === undefined ? 'Signed out' : 'Sign out', body.join('\n')))
  })
}
