/** `job status` of a job whose tasks report progress: a row per shard, the total, and JSON as is. */
import { describe, expect, test } from "vitest"
import type { JobDetail, Task } from "../client"
import { paint } from "../output"
import { jobOf, run } from "../testing"
import { rowsText, rowTotals, statusView } from "./job-status"

type Progress = NonNullable<Task["attempts"][number]["progress"]>

/** `job` with `progress[i]` on the latest attempt of task i (none when undefined). */
function withProgress(job: JobDetail, progress: (Progress | undefined)[]): JobDetail {
  return {
    ...job,
    tasks: job.tasks.map((task, i) => {
      const now = progress[i]
      const last = task.attempts.at(-1)
      if (!now || !last) return task
      return { ...task, attempts: [...task.attempts.slice(0, -1), { ...last, progress: now }] }
    }),
  }
}

const running = (states: Task["state"][]) => jobOf({ status: "RUNNING" }, states)

describe("rowTotals", () => {
  const cases: Record<string, { job: JobDetail; want: ReturnType<typeof rowTotals>; text?: string }> = {
    "no progress anywhere: nothing to show": { job: running(["RUNNING", "RUNNING"]), want: undefined },
    "every shard knows its total": {
      job: withProgress(running(["SUCCEEDED", "RUNNING"]), [
        { total: 100, done: 100, failed: 0, retries: 2 },
        { total: 100, done: 40, failed: 1 },
      ]),
      want: { done: 140, failed: 1, total: 200, retries: 2 },
      text: "140/200 done (70%), 1 failed, 2 retries",
    },
    "a shard without progress yet: the total is unknown": {
      job: withProgress(running(["RUNNING", "PENDING"]), [{ total: 100, done: 10, failed: 0 }]),
      want: { done: 10, failed: 0 },
      text: "10 done, 0 failed",
    },
    "progress only on an earlier attempt still marks a batch job": {
      job: (() => {
        const job = withProgress(running(["RUNNING"]), [{ total: 5, done: 2, failed: 0 }])
        const task = job.tasks[0] as Task
        const retry = { attemptUid: "a-0b", state: "ASSIGNED" as const, createdAt: task.updatedAt }
        return { ...job, tasks: [{ ...task, attempts: [...task.attempts, retry] }] }
      })(),
      want: { done: 0, failed: 0 },
    },
  }
  for (const [name, tc] of Object.entries(cases))
    test(name, () => {
      const got = rowTotals(tc.job)
      expect(got).toEqual(tc.want)
      if (tc.text && got) expect(rowsText(got)).toBe(tc.text)
    })
})

test("a row per shard with its state and rows, then the total", () => {
  const job = withProgress(running(["SUCCEEDED", "RUNNING", "PENDING"]), [
    { total: 1250, done: 1250, failed: 0, retries: 3 },
    { total: 1250, done: 600, failed: 2, retries: 0, resent: 40 },
  ])
  const text = statusView(paint(false), job, false)
  expect(text.slice(text.indexOf("SHARD"))).toBe(
    [
      "SHARD   STATE       ATTEMPTS   DONE   FAILED   TOTAL   RE-SENT   RETRIES",
      "0       SUCCEEDED   1          1250   0        1250    -         3",
      "1       RUNNING     1          600    2        1250    40        0",
      "2       PENDING     0          -      -        -       -         -",
      "Rows: 1850 done, 2 failed, 40 re-sent on retry, 3 retries",
      "",
    ].join("\n"),
  )
  // The usual summary and task table come first, unchanged.
  expect(text).toMatch(/^TASK\s+STATE\s+ATTEMPTS\s+EXIT\s+REASON$/m)
})

test("many shards: the unfinished ones are listed, all are in the total", () => {
  const states: Task["state"][] = Array.from({ length: 60 }, (_, i) => (i < 55 ? "SUCCEEDED" : "RUNNING"))
  const job = withProgress(
    running(states),
    states.map(() => ({ total: 10, done: 10, failed: 0 })),
  )
  const text = statusView(paint(false), job, false)
  expect(text.match(/^\d+\s+RUNNING\s+1\s+10\s+0\s+10\s+-\s+-$/gm)).toHaveLength(5)
  expect(text).toContain("... 55 more shards not shown (in the total)\n")
  expect(text).toMatch(/^Rows: 600\/600 done \(100%\), 0 failed$/m)
})

test("job status: unchanged without progress; with it, shards in the table and as is in JSON", async () => {
  const plain = jobOf({}, ["SUCCEEDED", "SUCCEEDED"])
  const spec = {
    ...plain.spec,
    batch: {
      input: "s3://data/rows.jsonl",
      output: "/shared/out/",
      idColumn: "id",
      promptColumn: "prompt",
      api: "chat" as const,
      concurrency: 8,
      checkpointEvery: 100,
      shardBy: "hash" as const,
      maxRetries: 8,
    },
  }
  const batch = withProgress(jobOf({ spec }, ["SUCCEEDED", "SUCCEEDED"]), [
    { total: 3, done: 3, failed: 0, retries: 1 },
    { total: 2, done: 1, failed: 1 },
  ])
  const routes = {
    "GET /v1/jobs/job-1": () => ({ body: plain }),
    "GET /v1/jobs/job-2": () => ({ body: { ...batch, id: "job-2" } }),
  }
  const before = await run(["job", "status", "job-1"], { routes })
  expect(before.code, before.stderr).toBe(0)
  expect(before.stdout).not.toMatch(/SHARD|Rows:/)
  expect(before.stdout).toMatch(
    /TASK\s+STATE\s+ATTEMPTS\s+EXIT\s+REASON\n0\s+SUCCEEDED\s+1\s+0\s+-\n1\s+SUCCEEDED\s+1\s+0\s+-\n$/,
  )

  const table = await run(["job", "status", "job-2"], { routes })
  expect(table.code, table.stderr).toBe(0)
  expect(before.stdout).not.toMatch(/^Results:/m)
  expect(table.stdout).toMatch(/^Input:\s+s3:\/\/data\/rows\.jsonl$/m)
  expect(table.stdout).toMatch(/^Results:\s+\/shared\/out\/shard-<n>\.jsonl$/m)
  expect(table.stdout).toMatch(/^1\s+SUCCEEDED\s+1\s+1\s+1\s+2\s+-\s+-$/m)
  expect(table.stdout).toMatch(/^Rows: 4\/5 done \(80%\), 1 failed, 1 retry\n$/m)

  const json = await run(["job", "status", "job-2", "-o", "json"], { routes })
  expect(JSON.parse(json.stdout).tasks.map((t: Task) => t.attempts.at(-1)?.progress)).toEqual([
    { total: 3, done: 3, failed: 0, retries: 1 },
    { total: 2, done: 1, failed: 1 },
  ])
})

test("job status --watch adds the rows to its progress line", async () => {
  const job = withProgress(jobOf({}, ["SUCCEEDED"]), [{ total: 4, done: 4, failed: 0 }])
  const res = await run(["job", "status", "job-1", "--watch"], {
    routes: { "GET /v1/jobs/job-1": () => ({ body: job }) },
  })
  expect(res.code, res.stderr).toBe(0)
  expect(res.stderr).toMatch(/job job-1: SUCCEEDED, 1\/1 done.*, rows 4\/4 done \(100%\), 0 failed/)
  expect(res.stdout).toMatch(/^Rows: 4\/4 done \(100%\), 0 failed$/m)
})
