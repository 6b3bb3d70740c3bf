// One option's value as its parser read it, checked against the kind oauth2-proxy reads it as
// (mappings.ts): each parser (toml.ts, flags.ts, alpha.ts) hands raw values here, so a value of the
// wrong type is refused the same way whatever form it was written in.

import { mappingOfFlag } from './mappings.js'
import { ImportError, type OptionMap, type OptionValue } from './options.js'

/** A raw value of `flag` read at `from`, checked and normalised, into `map` (a list appends). */
export function putOption(map: OptionMap, flag: string, raw: unknown, from: string): void {
  const mapping = mappingOfFlag(flag)
  if (mapping === undefined) throw new ImportError(`${from}: unknown option ${flag}: oauth2-proxy v7.15 has no such setting`)
  const value = checked(mapping.kind, raw, from)
  const before = map.get(flag)
  // A list given again adds to it (pflag's StringSlice); another value replaces the first.
  const merged: OptionValue =
    mapping.kind === 'list' && before !== undefined && Array.isArray(before.value) && Array.isArray(value)
      ? [...(before.value as string[]), ...(value as string[])]
      : value
  map.set(flag, { name: flag, value: merged, from: before === undefined || mapping.kind !== 'list' ? from : before.from })
}

function checked(kind: string, raw: unknown, from: string): OptionValue {
  switch (kind) {
    case 'bool':
      if (typeof raw === 'boolean') return raw
      if (typeof raw === 'string' && /^(1|t|true|0|f|false)$/i.test(raw)) return /^(1|t|true)$/i.test(raw)
      throw new ImportError(`${from}: expects true or false`)
    case 'int':
      if (typeof raw === 'number' && Number.isInteger(raw)) return raw
      if (typeof raw === 'bigint') return Number(raw)
      if (typeof raw === 'string' && /^-?\d+$/.test(raw)) return Number(raw)
      throw new ImportError(`${from}: expects a whole number`)
    case 'list':
      if (typeof raw === 'string') return [raw]
      if (Array.isArray(raw) && raw.every((v) => typeof v === 'string')) return raw
      throw new ImportError(`${from}: expects a list of strings`)
    default:
      if (typeof raw === 'string') return raw
      if (kind === 'duration' && typeof raw === 'number') return raw
      throw new ImportError(`${from}: expects a string`)
  }
}

/** `later` over `earlier`, as oauth2-proxy ranks its sources (flags over environment over file). */
export function overlay(earlier: OptionMap, later: OptionMap): OptionMap {
  const out: OptionMap = new Map(earlier)
  for (const [name, option] of later) out.set(name, option)
  return out
}
