// OpenID Connect Core: Form Post Basic Certification Profile Relying Party Tests
// (oidcc-client-formpost-basic-certification-test-plan): the modules of
// test/conformance/basic-rp-modules.ts with response_mode=form_post, the provider posting each
// response to POST /api/v1/openid/callback. Each test is named `<module> (<old rp-* name>)` and
// docs/conformance.md lists it. The cross-site POST of a real browser, and the refusals of the
// POST callback itself, are test/e2e/form-post-browser.test.ts and test/routes/form-post.test.ts.

import t from 'tap'
import { runBasicRpModules } from './basic-rp-modules.ts'

await runBasicRpModules(t, 'form_post')
