import t from 'tap'
import { runBasicRpModules } from './basic-rp-modules.js'

// The Form Post RP plan (oidcc-client-formpost-basic-certification-test-plan): the Basic RP
// modules with response_mode=form_post, the adversarial provider posting each response to
// POST /api/v1/openid/callback. The cross-site POST of a real browser, and the refusals of the
// POST callback itself, are test/e2e/form-post-browser.test.ts and test/routes/form-post.test.ts.

await runBasicRpModules(t, 'form_post')
