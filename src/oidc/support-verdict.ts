// One line of `openid-gateway check --online` (provider-support.ts compares the provider's
// metadata, client-probe.ts asks it about the client).

/** One thing compared: what it is, whether the provider and the configuration agree, and what was seen. */
export interface SupportVerdict {
  item: string
  ok: boolean
  /** The provider's answer does not tell (a warning, not a problem; `ok` stays true). */
  cannotTell?: boolean
  said: string
}
