/** One listing of Lepton's jobs read for the live and stopping attempts: found by id or by name, lost, queued, stopped. */
import { describe, expect, test } from "vitest"
import type { TaskRef } from "../protocol"
import { indexJobs, LostAfterMs, observeJobs, unlisted, withJobs } from "./observe"
import { jobName } from "./spec"
import type { LeptonJob } from "./types"

const t0 = "2026-01-01T00:00:00.000Z"
const minted = Date.parse(t0)

function ref(
  uid: string,
  state: "ASSIGNED" | "RUNNING" | "KILLED",
  target?: string,
  stopping = false,
): TaskRef {
  return {
    job: { id: "j1" } as TaskRef["job"],
    task: {
      pk: "p#job#j1",
      sk: "task#0",
      type: "task",
      version: 1,
      data: {
        index: 0,
        state,
        attempts: [
          { attemptUid: uid, state, submission: jobName(uid), createdAt: t0, ...(target ? { target } : {}) },
        ],
        ...(stopping ? { stopping: { attemptUid: uid, since: t0 } } : {}),
        failureCount: 0,
        preemptionCount: 0,
        updatedAt: t0,
      },
    },
  } as TaskRef
}

const job = (uid: string, state: string, extra: Record<string, unknown> = {}): LeptonJob => ({
  metadata: { id: `${jobName(uid)}-x1y2z`, name: jobName(uid) },
  status: { state, ...extra },
})

describe("observeJobs", () => {
  test("a job whose create answer was lost is found by its name and reported running with its Lepton id", () => {
    const live = ref("a-1", "ASSIGNED")
    const seen = observeJobs([live], [], indexJobs([job("a-1", "Running", { ready: 1, active: 1 })]), minted)
    expect(seen.transitions).toEqual([
      { ref: live, outcome: { kind: "running", attemptUid: "a-1", target: `${jobName("a-1")}-x1y2z` } },
    ])
  })

  test("a task already RUNNING is not told so again; a queued one gets Lepton's reason", () => {
    const running = ref("a-1", "RUNNING", `${jobName("a-1")}-x1y2z`)
    const queued = ref("a-2", "ASSIGNED", `${jobName("a-2")}-x1y2z`)
    const seen = observeJobs(
      [running, queued],
      [],
      indexJobs([job("a-1", "Running", { ready: 1, active: 1 }), job("a-2", "Queueing")]),
      minted,
    )
    expect(seen.transitions).toEqual([])
    expect(seen.waiting).toEqual([{ ref: queued, reason: expect.stringMatching(/^Lepton: queued/) }])
  })

  test("a state Lepton adds later changes nothing and is shown with its raw name as the submitted task's reason", () => {
    const queued = ref("a-1", "ASSIGNED", `${jobName("a-1")}-x1y2z`)
    const seen = observeJobs([queued], [], indexJobs([job("a-1", "Hibernating")]), minted)
    expect(seen.transitions).toEqual([])
    expect(seen.waiting).toEqual([
      { ref: queued, reason: `Lepton job ${jobName("a-1")}-x1y2z is in an unknown state "Hibernating"` },
    ])
    expect(seen.unknown).toEqual([seen.waiting[0]!.reason])
  })

  test("an unlisted job is lost only after LostAfterMs", () => {
    const live = ref("a-1", "RUNNING", "gone-1")
    expect(observeJobs([live], [], indexJobs([]), minted + LostAfterMs - 1).transitions).toEqual([])
    expect(observeJobs([live], [], indexJobs([]), minted + LostAfterMs + 1).transitions).toEqual([
      { ref: live, outcome: expect.objectContaining({ kind: "worker_failed", reason: "lost" }) },
    ])
  })

  test("stopping: Stopping is stopped again, Stopped and Completed are done", () => {
    const a = ref("a-1", "KILLED", `${jobName("a-1")}-x1y2z`, true)
    const b = ref("a-2", "KILLED", `${jobName("a-2")}-x1y2z`, true)
    const c = ref("a-3", "KILLED", `${jobName("a-3")}-x1y2z`, true)
    const seen = observeJobs(
      [],
      [a, b, c],
      indexJobs([job("a-1", "Stopping"), job("a-2", "Stopped"), job("a-3", "Completed")]),
      minted,
    )
    expect(seen.unstopped).toEqual([{ ref: a, target: `${jobName("a-1")}-x1y2z` }])
    expect(seen.transitions.map((t) => t.outcome)).toEqual([
      { kind: "stopped", attemptUid: "a-2" },
      { kind: "stopped", attemptUid: "a-3" },
    ])
  })

  test("a job that left the live list for the archive is read by its id; past the limit an attempt waits for the next pass, not lost", () => {
    const listed = indexJobs([job("a-1", "Running", { ready: 1, active: 1 })])
    const running = ref("a-1", "RUNNING", `${jobName("a-1")}-x1y2z`)
    const ended = ref("a-2", "RUNNING", `${jobName("a-2")}-x1y2z`)
    const later = ref("a-3", "RUNNING", `${jobName("a-3")}-x1y2z`)
    const stopping = ref("a-4", "KILLED", `${jobName("a-4")}-x1y2z`, true)
    const unsent = ref("a-5", "ASSIGNED")
    const { read, deferred } = unlisted(listed, [running, ended, later, unsent], [stopping], 2)
    expect([...read]).toEqual([
      [`${jobName("a-2")}-x1y2z`, [ended]],
      [`${jobName("a-3")}-x1y2z`, [later]],
    ])
    expect([...deferred]).toEqual([stopping])
    // The archived job read by its id ends the attempt as the live list would have.
    const index = withJobs(listed, [job("a-2", "Completed")])
    const seen = observeJobs([running, ended], [], index, minted + LostAfterMs + 1)
    expect(seen.transitions.map((t) => t.outcome)).toEqual([
      { kind: "succeeded", attemptUid: "a-2", exitCode: 0 },
    ])
  })
})
