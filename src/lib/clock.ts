// The gateway's one source of the current time for what it judges by time: session and
// access-token expiry, seals, revocations, refresh grace, and its caches. It is chosen once per
// process (runtime/process-state.ts) and handed down, so a test can move a whole gateway's time
// forward instead of waiting for it. Provider-issued tokens judged by openid-client at the
// callback, and timeouts of real waits (monotonic), are not on it: those are about real time.

/** The current time as epoch milliseconds. */
export interface Clock {
  now(): number
}

/** The system's clock: what every process runs on. */
export const systemClock: Clock = { now: () => Date.now() }
