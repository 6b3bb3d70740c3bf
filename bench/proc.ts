// CPU time and memory of a process tree from /proc: servers that are more than one process
// (Apache's parent and server process, the gateway's primary and its workers), a server that is
// not Node (oauth2-proxy), and the share of the host's CPU that processes outside the bench used
// while a row was measured (the machine is shared).

import { readdirSync, readFileSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import type { Stats } from './server.js'

/** Clock ticks per second of /proc/<pid>/stat's utime and stime (USER_HZ). */
const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK']).stdout?.toString().trim() || 100)

/** utime + stime, and with `reaped` also cutime + cstime: the children it has waited for. */
function cpuTicks(pid: number, reaped = false): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may hold spaces) in parentheses: utime and stime are
    // 14 and 15, cutime and cstime 16 and 17.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return Number(fields[11]) + Number(fields[12]) + (reaped ? Number(fields[13]) + Number(fields[14]) : 0)
  } catch {
    // A process that ended between the listing and the read.
    return 0
  }
}

function statusKiB(pid: number, field: 'VmHWM' | 'VmRSS'): number {
  try {
    const match = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return match === null ? 0 : Number(match[1])
  } catch {
    return 0
  }
}

function childrenOf(pid: number): number[] {
  const out = spawnSync('pgrep', ['-P', String(pid)]).stdout?.toString() ?? ''
  return out.split('\n').filter(Boolean).map(Number)
}

/** Every process below `pid`, from one pass over /proc (each process's parent is field 4 of its stat). */
function descendantsOf(pid: number): number[] {
  const children = new Map<number, number[]>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    let stat: string
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
    } catch {
      continue
    }
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
    children.set(parent, [...(children.get(parent) ?? []), Number(entry)])
  }
  const all: number[] = []
  const walk = (p: number): void => {
    for (const child of children.get(p) ?? []) {
      all.push(child)
      walk(child)
    }
  }
  walk(pid)
  return all
}

/** User + system CPU of `pid` and its children (all threads), and the sums of their resident and peak resident memory. */
export function treeStats(pid: number): Stats {
  const pids = [pid, ...childrenOf(pid)]
  return {
    cpuMicros: (pids.reduce((sum, p) => sum + cpuTicks(p), 0) / CLOCK_TICKS) * 1e6,
    rssBytes: pids.reduce((sum, p) => sum + statusKiB(p, 'VmRSS'), 0) * 1024,
    maxRssBytes: pids.reduce((sum, p) => sum + statusKiB(p, 'VmHWM'), 0) * 1024,
  }
}

/** Busy ticks of the whole host (every CPU: /proc/stat's first line, idle and iowait left out). */
function hostBusyTicks(): number {
  const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number)
  // user nice system idle iowait irq softirq steal (guest time is already in user).
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = fields
  return user + nice + system + irq + softirq + steal
}

/** A reading of the host's busy time and of the bench's own (this process and all it started). */
export interface HostReading {
  host: number
  bench: number
  at: number
}

export function readHost(): HostReading {
  // A child that ended (h2load after its round) moves its time into its parent's cutime and cstime.
  const bench = [process.pid, ...descendantsOf(process.pid)].reduce((sum, p) => sum + cpuTicks(p, true), 0)
  return { host: hostBusyTicks(), bench, at: performance.now() }
}

/**
 * The share of the host's CPU (all cores: 1 is every core busy) that processes outside the bench
 * used between two readings: other work on a shared machine, which the bench's servers met.
 */
export function othersShare(before: HostReading, after: HostReading, cores: number): number {
  const seconds = (after.at - before.at) / 1000
  const others = after.host - before.host - (after.bench - before.bench)
  return Math.max(0, others / CLOCK_TICKS / seconds / cores)
}

/** TCP connections this host has opened so far (/proc/net/snmp's ActiveOpens: every connect, of every process). */
export function tcpActiveOpens(): number {
  const lines = readFileSync('/proc/net/snmp', 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('Tcp:'))
  const [names, values] = lines.map((line) => line.split(/\s+/))
  const index = names?.indexOf('ActiveOpens') ?? -1
  return index < 0 ? Number.NaN : Number(values?.[index])
}
