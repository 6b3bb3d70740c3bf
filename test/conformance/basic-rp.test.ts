// OpenID Connect Core: Basic Certification Profile Relying Party Tests
// (oidcc-client-basic-certification-test-plan, variant response_type code, response_mode
// default, client_secret_basic): the modules of test/conformance/basic-rp-modules.ts, the
// response in the callback's query. Each test is named `<module> (<old rp-* name>)` and
// docs/conformance.md lists it; test/docs/conformance-table.test.ts keeps the two equal.

import t from 'tap'
import { runBasicRpModules } from './basic-rp-modules.ts'

await runBasicRpModules(t, 'query')
