import type { FastifyInstance } from 'fastify'
import { escapeHtml } from '../lib/html.js'
import { LOGOUT_PATH, SIGNED_OUT_PATH, SIGN_IN_PATH, signInPath } from '../paths.js'
import { formTargetsOf, type PageDeps } from './error-page.js'
import { actions, renderPage, sendPage } from './page.js'
import { signedInAs } from './who.js'

// GET /api/v1/openid/signed-out: where a sign-out ends (the sign-out form's redirect when the
// provider has no end-session endpoint; the provider's post-logout redirect when configured so).
// It tells the truth: a browser that is still (or again) signed in is told so.

export async function signedOutRoutes(app: FastifyInstance, deps: PageDeps): Promise<void> {
  app.get(SIGNED_OUT_PATH.slice(SIGN_IN_PATH.length), async (req, reply) => {
    const who = await signedInAs(req, deps.store)
    const body =
      who === undefined
        ? [
            '<h1>You are signed out</h1>',
            '<p>Your sign-in to this site has ended. To sign in as someone else, sign out at the identity provider as well if it still remembers you.</p>',
            actions(deps.publicUrl + signInPath('/'), 'Sign in again', undefined),
          ]
        : [
            '<h1>You are still signed in</h1>',
            `<p class="who">Signed in as <strong>${escapeHtml(who.name)}</strong>.</p>`,
            actions(`${deps.publicUrl}/`, 'Continue', deps.publicUrl + LOGOUT_PATH),
          ]
    return sendPage(reply, 200, { formTargets: formTargetsOf(deps) }, renderPage(who === undefined ? 'Signed out' : 'Still signed in', body.join('\n')))
  })
}
