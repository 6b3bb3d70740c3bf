// tap's `before` program (.taprc): `npm run build` (src/ into build/, with the ext_authz protos)
// before any test file runs, so that the tests that start the gateway, the demo or the
// development provider as processes of their own start the JavaScript users run (`npm start`,
// `npm run demo`), current with the source, instead of each process compiling every module
// through the TypeScript loader again (seconds per process on a loaded 2-core machine, which made
// the CLI and worker test files run past tap's per-file timeout).

import { execFileSync } from 'node:child_process'

execFileSync('npm', ['run', '--silent', 'build'], { cwd: new URL('../', import.meta.url).pathname, stdio: ['ignore', 'ignore', 'inherit'] })
