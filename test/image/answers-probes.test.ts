import t from 'tap'
import { startImageStack } from '../fixtures/image.js'

// The built image, running its own ENTRYPOINT and CMD with the documented variables, answers its
// probes on the management port, and the HEALTHCHECK it declares (read from the image, as a
// container engine reads it) succeeds inside the container.

t.setTimeout(15 * 60_000)

t.test('/healthz, /readyz and the image\'s HEALTHCHECK', async (t) => {
  const stack = await startImageStack(t)
  t.comment(`image ${stack.built.image}: ${(stack.built.sizeBytes / 1e6).toFixed(0)} MB, build ${(stack.built.ms / 1000).toFixed(1)} s`)
  t.equal((await fetch(`${stack.management}/healthz`)).status, 200, '/healthz')
  // Ready once the provider's metadata is loaded: the gateway reads it over https, trusting the
  // mounted certificate through NODE_EXTRA_CA_CERTS.
  const ready = await fetch(`${stack.management}/readyz`)
  t.equal(ready.status, 200, `/readyz: ${await ready.text()}`)

  const test = stack.built.config.Healthcheck?.Test ?? []
  t.equal(test[0], 'CMD', 'an exec-form HEALTHCHECK')
  const check = await stack.container.exec(test.slice(1))
  t.equal(check.code, 0, `the HEALTHCHECK command succeeds: ${test.slice(1).join(' ')}`, { stderr: check.stderr })
})
