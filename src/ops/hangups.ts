// The process's SIGHUP from its first moment. Node's default for SIGHUP ends the process, and a
// ConfigMap update at rollout (or a primary's reload) can send one while the first app is still
// being built, which waits for a provider or Redis that may be slow to answer. cli.ts imports this
// module first, so the handler is in place before any other module is even evaluated; until the
// gateway hands over its reload (`handle`), a SIGHUP is remembered and the reload runs once
// startup is done. Nothing else should import it: importing it installs the handler.

export interface Hangups {
  /** From now on SIGHUP calls `reload`; a SIGHUP received before calls it at once. */
  handle(reload: () => void): void
}

let reload: (() => void) | undefined
let pending = false
process.on('SIGHUP', () => {
  if (reload === undefined) pending = true
  else reload()
})

export const hangups: Hangups = {
  handle(next) {
    reload = next
    if (pending) {
      pending = false
      next()
    }
  },
}
