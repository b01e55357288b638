/**
 * Process groups: every attempt runs in its own group (spawned detached), so stopping an attempt
 * reaches the whole tree it started (`sh -c 'a & b'`), not only its first process.
 */
import { readdirSync, readFileSync } from "node:fs"

/** Send a signal to every process of a group; false when the group no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal)
    return true
  } catch {
    return false
  }
}

/**
 * Whether a group still has a living (not zombie) process. Orphans of an attempt are re-parented to
 * PID 1, which in containers often never reaps them; a zombie holds no resources and must not keep
 * a stop waiting, so on Linux the group is read from /proc instead of trusting `kill(-pgid, 0)`.
 */
export function groupAlive(pgid: number): boolean {
  if (process.platform !== "linux") return signalGroup(pgid, 0)
  return livingProcesses((stat) => stat.pgrp === pgid).length > 0
}

/** Whether one process is alive and not a zombie. */
export function processAlive(pid: number): boolean {
  if (process.platform !== "linux") {
    try {
      process.kill(pid, 0)
      return true
    } catch {
      return false
    }
  }
  const stat = readStat(pid)
  return stat !== undefined && stat.state !== "Z" && stat.state !== "X"
}

export interface ProcStat {
  pid: number
  state: string
  ppid: number
  pgrp: number
  /** When the process started, in clock ticks since boot: with the pid, it names one process for good. */
  startTime: number
}

/** Living processes on this machine that match (Linux only; empty elsewhere). */
export function livingProcesses(match: (stat: ProcStat) => boolean): ProcStat[] {
  let entries: string[]
  try {
    entries = readdirSync("/proc")
  } catch {
    return []
  }
  const found: ProcStat[] = []
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    const stat = readStat(Number(entry))
    if (stat && stat.state !== "Z" && stat.state !== "X" && match(stat)) found.push(stat)
  }
  return found
}

function readStat(pid: number): ProcStat | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/stat`, "utf8")
    // The command name is in parentheses and may itself contain spaces or parentheses.
    const fields = raw.slice(raw.lastIndexOf(")") + 2).split(" ")
    return {
      pid,
      state: fields[0] ?? "?",
      ppid: Number(fields[1]),
      pgrp: Number(fields[2]),
      startTime: Number(fields[19]),
    }
  } catch {
    return undefined
  }
}

/** One process's stat (Linux), living or a zombie; undefined when it is gone or unreadable. */
export function processStat(pid: number): ProcStat | undefined {
  return readStat(pid)
}

/** This boot's id (Linux): pids and start times of another boot name other processes. */
export function bootId(): string {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
  } catch {
    return ""
  }
}

/** Whether a process's environment holds `NAME=value` (Linux; false when unreadable). */
export function environHas(pid: number, entry: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(entry)
  } catch {
    return false
  }
}

/** A process's argv joined by spaces; empty when it is gone or unreadable. */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim()
  } catch {
    return ""
  }
}
