import t from 'tap'
import { describeBuild, startImageStack } from '../fixtures/image.ts'

// The built image, running its own ENTRYPOINT and CMD with the documented variables, answers its
// probes on the management port, and the HEALTHCHECK it declares (read from the image, as a
// container engine reads it) succeeds inside the container.

t.setTimeout(15 * 60_000)

t.test("/healthz, /readyz and the image's HEALTHCHECK", async (t) => {
  const stack = await startImageStack(t)
  t.comment(describeBuild(stack.built))
  t.equal((await fetch(`${stack.management}/healthz`)).status, 200, '/healthz')
  // Ready once the provider's metadata and keys are loaded: the gateway reads them over https,
  // trusting the mounted certificate through NODE_EXTRA_CA_CERTS.
  const ready = await stack.ready()
  t.equal(ready.status, 200, `/readyz: ${ready.body}`)

  const test = stack.built.config.Healthcheck?.Test ?? []
  t.equal(test[0], 'CMD', 'an exec-form HEALTHCHECK')
  const check = await stack.container.exec(test.slice(1))
  t.equal(check.code, 0, `the HEALTHCHECK command succeeds: ${test.slice(1).join(' ')}`, { stderr: check.stderr })
})
