// tap's `before` program (.taprc): `npm run build` (src/ into build/, with the ext_authz protos)
// before any test file runs. The tests import the gateway from build/ (package.json "imports"
// #src/*, types from src/), and the tests that start the gateway, the demo or the development
// provider as processes of their own start the JavaScript users run (`npm start`, `npm run demo`):
// one compile for the whole run instead of each test process transpiling the modules it imports.

import { execFileSync } from 'node:child_process'

execFileSync('npm', ['run', '--silent', 'build'], { cwd: new URL('../', import.meta.url).pathname, stdio: ['ignore', 'ignore', 'inherit'] })
