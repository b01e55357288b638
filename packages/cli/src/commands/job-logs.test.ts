/** `job logs`: which lines are new while following, task prefixes, and following until the task ends. */
import { expect, test } from "vitest"
import { jobOf, run } from "../testing"
import { newLines } from "./job-logs"

test.each([
  ["first poll prints everything", [], ["a", "b"], ["a", "b"]],
  ["nothing new", ["a", "b"], ["a", "b"], []],
  ["appended lines", ["a", "b"], ["a", "b", "c"], ["c"]],
  ["a sliding window", ["1", "2", "3"], ["3", "4", "5"], ["4", "5"]],
  ["a larger window than before", ["2", "3"], ["1", "2", "3", "4"], ["4"]],
  ["repeated lines keep the largest overlap", ["x", "x"], ["x", "x", "x"], []],
  ["no overlap at all: everything is new", ["a"], ["b", "c"], ["b", "c"]],
])("%s", (_name, prev, cur, want) => {
  expect(newLines(prev, cur)).toEqual(want)
})

test("logs of several tasks are prefixed with the task index; one task is not", async () => {
  const routes = {
    "GET /v1/jobs/job-1": () => ({ body: jobOf({}, ["SUCCEEDED", "SUCCEEDED"]) }),
    "GET /v1/jobs/job-1/tasks/0/logs": () => ({
      body: { attemptUid: "a-0", lines: ["shard 0"], truncated: false },
    }),
    "GET /v1/jobs/job-1/tasks/1/logs": () => ({
      body: { attemptUid: "a-1", lines: ["shard 1"], truncated: false },
    }),
    // Several tasks come in one request (one command on a Slurm cluster).
    "GET /v1/jobs/job-1/logs": ({ url }: { url: URL }) => ({
      body: {
        items: (url.searchParams.get("tasks") ?? "").split(",").map((i) => ({
          task: Number(i),
          attemptUid: `a-${i}`,
          lines: [`shard ${i}`],
          truncated: false,
        })),
      },
    }),
  }
  const all = await run(["job", "logs", "job-1"], { routes })
  expect(all.stdout).toBe("[0] shard 0\n[1] shard 1\n")
  expect(all.requests.map((r) => r.path)).toContain("/v1/jobs/job-1/logs?tail=100&tasks=0%2C1")
  expect((await run(["job", "logs", "job-1", "--task", "1"], { routes })).stdout).toBe("shard 1\n")
  const missing = await run(["job", "logs", "job-1", "--task", "5"], { routes })
  expect(missing.code).toBe(3)
})

test("--follow prints new lines until the task ends", async () => {
  // The job is read once up front, then once per poll before the logs: it ends at the third poll.
  const polls = [["one"], ["one", "two"], ["one", "two", "three"]]
  const res = await run(["job", "logs", "job-1", "--task", "0", "--follow"], {
    routes: {
      "GET /v1/jobs/job-1": ({ n }) => ({ body: jobOf({}, [n >= 4 ? "SUCCEEDED" : "RUNNING"]) }),
      "GET /v1/jobs/job-1/tasks/0/logs": ({ n }) => ({
        body: { attemptUid: "a-0", lines: polls[Math.min(n, 3) - 1], truncated: false },
      }),
    },
  })
  expect(res.stdout).toBe("one\ntwo\nthree\n")
})
