/** A batch shard's progress from its log: the last line of its attempt, and whose logs a pass reads. */
import { describe, expect, test } from "vitest"
import { FakeClock } from "../util/clock"
import { memoryLogger, silentLogger } from "../util/logger"
import {
  ProgressBudgetMs,
  ProgressReadsAtOnce,
  progressFromLog,
  progressReads,
  readProgressLogs,
} from "./progress-log"
import type { TaskRef } from "./protocol"

const t0 = "2026-01-01T00:00:00.000Z"

/** A launched shard (its backend target known) of a batch job (the runner prints progress lines) or of a plain job. */
function shard(uid: string, state: "ASSIGNED" | "RUNNING", batch = true): TaskRef {
  return {
    job: { id: "j1", spec: batch ? { batch: { input: "in", output: "out" } } : {} },
    task: {
      pk: "p#job#j1",
      sk: "task#0",
      type: "task",
      version: 1,
      data: {
        index: 0,
        state,
        attempts: [{ attemptUid: uid, state, submission: `job-${uid}`, target: `job-${uid}`, createdAt: t0 }],
        failureCount: 0,
        preemptionCount: 0,
        updatedAt: t0,
      },
    },
  } as unknown as TaskRef
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

describe("readProgressLogs", () => {
  const logOf = (uid: string, done: number) =>
    `starting\n@@swarmplane:progress@@ {"runId":"${uid}","state":"running","total":250,"done":${done},"failed":0}\n`
  const uidOf = (ref: TaskRef) => ref.task.data.attempts.at(-1)!.attemptUid

  test("each shard's last counters from its log; a failed read is logged at debug and the others still count", async () => {
    const logger = memoryLogger()
    const refs = ["a-1", "a-2", "a-3"].map((u) => shard(u, "RUNNING"))
    const got = await readProgressLogs(
      refs,
      async (ref, attempt) => {
        if (attempt.attemptUid === "a-2") throw new Error("pod sp-a-2 not found")
        return attempt.attemptUid === "a-3" ? "pulling image\n" : logOf(uidOf(ref), 40)
      },
      new FakeClock(),
      logger,
      "p eks k8s",
    )
    expect(got.map((g) => [uidOf(g.ref), g.progress])).toEqual([["a-1", { done: 40, failed: 0, total: 250 }]])
    expect(logger.entries).toEqual([
      {
        level: "debug",
        message: "p eks k8s: no progress read for job-a-2: pod sp-a-2 not found",
        fields: undefined,
      },
    ])
  })

  test("a few at once, and none begun once the budget is spent", async () => {
    const clock = new FakeClock()
    const refs = Array.from({ length: 12 }, (_, i) => shard(`a-${i}`, "RUNNING"))
    let inFlight = 0
    let most = 0
    const begun: string[] = []
    const got = await readProgressLogs(
      refs,
      async (ref, _attempt, until) => {
        expect(until).toBeLessThanOrEqual(Date.parse("2026-01-01T00:00:00Z") + ProgressBudgetMs)
        begun.push(uidOf(ref))
        inFlight++
        most = Math.max(most, inFlight)
        // Each read takes a third of the budget: the first round of readers fits, later ones find it spent.
        await clock.sleep(ProgressBudgetMs / 3)
        inFlight--
        return logOf(uidOf(ref), 1)
      },
      clock,
      silentLogger,
      "p",
    )
    expect(most).toBe(ProgressReadsAtOnce)
    expect(begun.length).toBeLessThan(refs.length)
    expect(got).toHaveLength(begun.length)
  })
})
