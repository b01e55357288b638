/** One listing of Lepton's jobs read for the live and stopping attempts: found by id or by name, lost, queued, stopped. */
import { describe, expect, test } from "vitest"
import type { TaskRef } from "../protocol"
import { indexJobs, LostAfterMs, observeJobs, progressFromLog, progressReads } from "./observe"
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
})

/** A shard of a batch job (the runner prints progress lines) or of a plain job. */
function shard(uid: string, state: "ASSIGNED" | "RUNNING", batch = true): TaskRef {
  const r = ref(uid, state, `${jobName(uid)}-x1y2z`)
  return { ...r, job: { id: "j1", spec: batch ? { batch: { input: "in", output: "out" } } : {} } } as TaskRef
}

/** Lines as a batch shard's log shows them: the runner's log on stderr, its progress lines on stdout. */
const shardLog = [
  "2026-12-02T04:50:01.000Z info run-batch: shard 0/4: 250 of 1000 rows (hash), 0 done by earlier attempts, 250 to do; run at_1",
  '@@swarmplane:progress@@ {"shardId":0,"nshards":4,"runId":"at_1","state":"running","total":250,"done":0,"failed":0,"retries":0,"skipped":0,"sent":0,"resent":0,"updatedAt":"2026-12-02T04:50:01.010Z"}',
  "2026-12-02T04:50:02.000Z info run-batch: shard 0/4: chat API of http://127.0.0.1:40123, model echo",
  '@@swarmplane:progress@@ {"shardId":0,"nshards":4,"runId":"at_1","state":"running","total":250,"done":10,"failed":0,"retries":2,"skipped":0,"sent":11,"resent":0,"updatedAt":"2026-12-02T04:50:02.500Z"}',
  "2026-12-02T04:50:02.501Z info run-batch: shard 0/4: part-at_1-000001.jsonl: done 10/250, failed 0, retries 2",
  '@@swarmplane:progress@@ {"shardId":0,"nshards":4,"runId":"at_1","state":"running","total":250,"done":20,"failed":1,"retr',
].join("\n")

describe("progressFromLog", () => {
  const cases: Record<string, { text: string; uid: string; want: unknown }> = {
    "the last whole line of the attempt, a line cut short passed over": {
      text: shardLog,
      uid: "at/1",
      want: { done: 10, failed: 0, total: 250, retries: 2 },
    },
    "a line whose start was cut off by the tail still reads": {
      text: `ress@@ {"done":99}\n${shardLog.split("\n").slice(3, 4).join("")}`,
      uid: "at/1",
      want: { done: 10, failed: 0, total: 250, retries: 2 },
    },
    "another attempt's line (another runId) is not this one's": {
      text: shardLog,
      uid: "at-2",
      want: undefined,
    },
    "a log with no progress line (not started yet)": {
      text: "pulling image\nstarting\n",
      uid: "at/1",
      want: undefined,
    },
    "the final line, after the merge": {
      text: `${shardLog}\n@@swarmplane:progress@@ {"runId":"at_1","state":"succeeded","total":250,"done":250,"failed":0,"retries":3,"resent":4}\n`,
      uid: "at/1",
      want: { done: 250, failed: 0, total: 250, retries: 3, resent: 4 },
    },
    "a document without a whole done count is no progress": {
      text: '@@swarmplane:progress@@ {"runId":"at_1","done":-1}\n',
      uid: "at/1",
      want: undefined,
    },
  }
  for (const [name, tc] of Object.entries(cases))
    test(name, () => expect(progressFromLog(tc.text, tc.uid)).toEqual(tc.want))
})

describe("progressReads", () => {
  const uid = (ref: TaskRef) => ref.task.data.attempts.at(-1)!.attemptUid

  test("only batch attempts that run or just ended; those that ended first", () => {
    const running = shard("a-1", "RUNNING")
    const plain = shard("a-2", "RUNNING", false)
    const queued = shard("a-3", "ASSIGNED")
    const ending = shard("a-4", "RUNNING")
    const starting = shard("a-5", "ASSIGNED")
    const reads = progressReads(
      [running, plain, queued, ending, starting],
      [
        { ref: ending, outcome: { kind: "succeeded", attemptUid: "a-4", exitCode: 0 } },
        { ref: starting, outcome: { kind: "running", attemptUid: "a-5" } },
        { ref: plain, outcome: { kind: "succeeded", attemptUid: "a-2" } },
      ],
      0,
    )
    expect(reads.map(uid)).toEqual(["a-4", "a-1", "a-5"])
  })

  test("past the limit, turns pick different runs of the running attempts, so each is read within a few passes", () => {
    const live = Array.from({ length: 10 }, (_, i) => shard(`a-${String(i).padStart(2, "0")}`, "RUNNING"))
    const ended = shard("b-1", "RUNNING")
    const transitions = [{ ref: ended, outcome: { kind: "failed" as const, attemptUid: "b-1", reason: "x" } }]
    const seen = new Set<string>()
    // Passes a minute apart, the turn being the time in seconds.
    for (let turn = 60; turn <= 20 * 60; turn += 60) {
      const reads = progressReads([...live, ended], transitions, turn, 4)
      expect(reads).toHaveLength(4)
      expect(uid(reads[0]!)).toBe("b-1")
      for (const r of reads.slice(1)) seen.add(uid(r))
    }
    expect(seen.size).toBe(10)
  })

  test("no batch attempt, no read", () => {
    expect(progressReads([shard("a-1", "RUNNING", false)], [], 0)).toEqual([])
  })
})
