/**
 * The process groups an agent started, one small file each in its state folder: written before the
 * group is let run, removed once it is gone. The watcher of each group kills it when its agent dies;
 * these records are for when the watcher died too (killed with the agent, an OOM kill of the lot): an
 * agent that starts kills the groups of agents that are gone. A record names its group by the leader's
 * pid and start time (and the boot), so a pid the system has since given to another process is never
 * killed; when the leader is gone, only processes of the group that carry the attempt's
 * `ATTEMPT_UID` are.
 */
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { bootId, environHas, livingProcesses, processStat, signalGroup } from "./process-group"

export interface GroupRecord {
  pgid: number
  /** The group leader's start time (clock ticks since boot). */
  leaderStart: number
  attemptUid: string
  agentPid: number
  agentStart: number
  boot: string
}

/** A leftover an agent killed: the group, and how many of its processes were still living. */
export interface Reaped {
  record: GroupRecord
  processes: number
}

export class GroupRecords {
  private readonly agent: { pid: number; start: number }
  private readonly boot = bootId()

  /** Open (create) the folder, 0700; throws a message naming it when it cannot be written. */
  constructor(readonly dir: string) {
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 })
      const probe = join(dir, `.probe-${process.pid}`)
      writeFileSync(probe, "", { mode: 0o600 })
      rmSync(probe, { force: true })
    } catch (error) {
      throw new Error(
        `--state-dir: cannot write ${dir} (${(error as NodeJS.ErrnoException).code ?? String(error)}); give a folder this user can write`,
      )
    }
    this.agent = { pid: process.pid, start: processStat(process.pid)?.startTime ?? 0 }
  }

  /**
   * Record the group `pgid` (its leader just started) of an attempt; returns what forgets it once the
   * group is gone. Throws when the record cannot be written: the group must then not be let run.
   */
  track(pgid: number, attemptUid: string): () => void {
    const record: GroupRecord = {
      pgid,
      leaderStart: processStat(pgid)?.startTime ?? 0,
      attemptUid,
      agentPid: this.agent.pid,
      agentStart: this.agent.start,
      boot: this.boot,
    }
    const file = join(this.dir, `group-${pgid}-${record.leaderStart}.json`)
    writeFileSync(`${file}.tmp`, JSON.stringify(record), { mode: 0o600 })
    renameSync(`${file}.tmp`, file)
    return () => rmSync(file, { force: true })
  }

  /**
   * Kill (SIGKILL) the recorded groups whose agent is gone and that are still the same groups, and
   * drop their records; groups of living agents (this one, or others sharing the folder) are left.
   */
  reap(): Reaped[] {
    const reaped: Reaped[] = []
    let files: string[]
    try {
      files = readdirSync(this.dir).filter((f) => /^group-\d+-\d+\.json$/.test(f))
    } catch {
      return reaped
    }
    for (const name of files) {
      const file = join(this.dir, name)
      const record = readRecord(file)
      if (record && record.boot === this.boot && this.agentAlive(record)) continue
      if (record && record.boot === this.boot) {
        const processes = killLeftover(record)
        if (processes > 0) reaped.push({ record, processes })
      }
      rmSync(file, { force: true })
    }
    return reaped
  }

  private agentAlive(record: GroupRecord): boolean {
    const agent = processStat(record.agentPid)
    return agent !== undefined && agent.startTime === record.agentStart && agent.state !== "Z"
  }
}

function readRecord(file: string): GroupRecord | undefined {
  try {
    const r = JSON.parse(readFileSync(file, "utf8")) as Partial<GroupRecord>
    const numbers = [r.pgid, r.leaderStart, r.agentPid, r.agentStart]
    if (!numbers.every((n) => Number.isInteger(n) && (n as number) >= 0) || !r.pgid) return undefined
    if (typeof r.attemptUid !== "string" || typeof r.boot !== "string") return undefined
    return r as GroupRecord
  } catch {
    return undefined
  }
}

/** SIGKILL what is left of a recorded group, if it is still that group; how many processes were. */
function killLeftover(record: GroupRecord): number {
  const members = livingProcesses((s) => s.pgrp === record.pgid)
  if (members.length === 0) return 0
  const leader = processStat(record.pgid)
  if (leader) {
    // Another start time: the pid names another process now (the group ended, its id was given again).
    if (leader.pgrp !== record.pgid || leader.startTime !== record.leaderStart) return 0
    signalGroup(record.pgid, "SIGKILL")
    return members.length
  }
  // The leader is gone: a group id outlives its leader only while the group has members, so these may
  // still be the attempt's; only those that carry its id (and started after it) are killed.
  const ours = members.filter(
    (s) => s.startTime >= record.leaderStart && environHas(s.pid, `ATTEMPT_UID=${record.attemptUid}`),
  )
  for (const s of ours) {
    try {
      process.kill(s.pid, "SIGKILL")
    } catch {}
  }
  return ours.length
}
