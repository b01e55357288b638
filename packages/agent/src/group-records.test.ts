/**
 * Records of process groups and the reaping of leftovers, with real processes: a group whose agent is
 * gone is killed; one of a living agent, one whose pid now names another process, and one of another
 * boot are not.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { type GroupRecord, GroupRecords } from "./group-records"
import { processStat } from "./process-group"
import { livingSleeps, sleepMarker, waitFor } from "./testing/wait"

const started: ChildProcess[] = []
afterEach(() => {
  for (const c of started.splice(0))
    try {
      process.kill(-(c.pid ?? 0), "SIGKILL")
    } catch {}
})

/** A detached group of two sleeps, as an attempt's, with `ATTEMPT_UID` set. */
async function group(attemptUid: string, env: Record<string, string> = {}) {
  const marker = sleepMarker()
  const child = spawn("sh", ["-c", `sleep ${marker} & sleep ${marker}; :`], {
    detached: true,
    stdio: "ignore",
    env: { PATH: process.env.PATH ?? "", ATTEMPT_UID: attemptUid, ...env },
  })
  started.push(child)
  await waitFor("the group's sleeps", () => livingSleeps(marker).length === 2)
  return { pgid: child.pid ?? 0, marker }
}

/** A pid and start time of an agent that is gone. */
function goneAgent(): { pid: number; start: number } {
  const done = spawnSync("sh", ["-c", "echo $$"], { encoding: "utf8" })
  return { pid: Number(done.stdout.trim()), start: 1 }
}

function recordsIn(dir: string): string[] {
  return readdirSync(dir).filter((f) => f.startsWith("group-"))
}

/** Rewrite the one record in `dir` as if another agent (or boot) had written it. */
function rewrite(dir: string, change: Partial<GroupRecord>): void {
  const [file] = recordsIn(dir)
  const path = join(dir, file ?? "")
  writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(path, "utf8")), ...change }))
}

describe("group records", () => {
  it("records a group in a file of its own and forgets it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sp-records-"))
    const records = new GroupRecords(join(dir, "state"))
    const { pgid } = await group("att-1")
    const forget = records.track(pgid, "att-1")
    const [file] = recordsIn(records.dir)
    expect(JSON.parse(readFileSync(join(records.dir, file ?? ""), "utf8"))).toMatchObject({
      pgid,
      attemptUid: "att-1",
      agentPid: process.pid,
      leaderStart: processStat(pgid)?.startTime,
    })
    forget()
    expect(recordsIn(records.dir)).toEqual([])
  })

  it("kills the leftover group of an agent that is gone, and drops its record", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sp-records-"))
    const { pgid, marker } = await group("att-left")
    new GroupRecords(dir).track(pgid, "att-left")
    const gone = goneAgent()
    rewrite(dir, { agentPid: gone.pid, agentStart: gone.start })
    const reaped = new GroupRecords(dir).reap()
    expect(reaped).toEqual([
      { record: expect.objectContaining({ pgid, attemptUid: "att-left" }), processes: 3 },
    ])
    await waitFor("the leftover to end", () => livingSleeps(marker).length === 0, { timeoutMs: 5000 })
    expect(recordsIn(dir)).toEqual([])
  })

  it("leaves the groups of a living agent alone (agents may share the folder)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sp-records-"))
    const { pgid, marker } = await group("att-live")
    new GroupRecords(dir).track(pgid, "att-live")
    expect(new GroupRecords(dir).reap()).toEqual([])
    expect(livingSleeps(marker)).toHaveLength(2)
    expect(recordsIn(dir)).toHaveLength(1)
  })

  it("never kills a group whose id now names another process (its leader started at another time)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sp-records-"))
    const { pgid, marker } = await group("att-recycled")
    new GroupRecords(dir).track(pgid, "att-recycled")
    const gone = goneAgent()
    rewrite(dir, { agentPid: gone.pid, agentStart: gone.start, leaderStart: 1 })
    expect(new GroupRecords(dir).reap()).toEqual([])
    expect(livingSleeps(marker)).toHaveLength(2)
    expect(recordsIn(dir)).toEqual([])
  })

  it("without its leader, kills only the group's processes that carry the attempt's id", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sp-records-"))
    const { pgid, marker } = await group("att-orphans")
    new GroupRecords(dir).track(pgid, "att-orphans")
    // The leader exits; its sleeps stay in the group.
    process.kill(pgid, "SIGKILL")
    await waitFor("the leader to be gone", () => {
      const s = processStat(pgid)
      return s === undefined || s.state === "Z"
    })
    const gone = goneAgent()
    rewrite(dir, { agentPid: gone.pid, agentStart: gone.start })
    const other = mkdtempSync(join(tmpdir(), "sp-records-"))
    const stranger = await group("att-someone-else")
    new GroupRecords(other).track(stranger.pgid, "att-someone-else")
    // The stranger's group is recorded under the orphans' attempt: its processes do not carry that id.
    rewrite(other, { agentPid: gone.pid, agentStart: gone.start, attemptUid: "att-orphans", leaderStart: 1 })
    expect(new GroupRecords(other).reap()).toEqual([])
    expect(livingSleeps(stranger.marker)).toHaveLength(2)
    expect(new GroupRecords(dir).reap()).toMatchObject([{ processes: 2 }])
    await waitFor("the orphans to end", () => livingSleeps(marker).length === 0, { timeoutMs: 5000 })
  })

  it("drops records of another boot without killing anything", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sp-records-"))
    const { pgid, marker } = await group("att-boot")
    new GroupRecords(dir).track(pgid, "att-boot")
    const gone = goneAgent()
    rewrite(dir, { agentPid: gone.pid, agentStart: gone.start, boot: "another-boot" })
    expect(new GroupRecords(dir).reap()).toEqual([])
    expect(livingSleeps(marker)).toHaveLength(2)
    expect(recordsIn(dir)).toEqual([])
  })

  it("says which folder it cannot write, and how to fix it", () => {
    const dir = mkdtempSync(join(tmpdir(), "sp-records-"))
    writeFileSync(join(dir, "file"), "")
    expect(() => new GroupRecords(join(dir, "file", "state"))).toThrow(
      /^--state-dir: cannot write .*file\/state \(ENOTDIR\); give a folder this user can write$/,
    )
    expect(existsSync(join(dir, "file"))).toBe(true)
  })
})
