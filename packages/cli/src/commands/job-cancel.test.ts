/**
 * `job cancel`: waits, with a progress line, until the control loop has brought the job to rest (a
 * large job's tasks are killed a page at a time), or returns at once with `--no-wait`.
 */
import { expect, test } from "vitest"
import type { JobDetail } from "../client"
import { jobOf, run } from "../testing"

/** A 10,000-task job being cancelled: `killed` of its tasks killed so far, the rest pending. */
function cancelling(killed: number, status: JobDetail["status"] = "PENDING"): JobDetail {
  return jobOf({
    status,
    cancelRequested: true,
    counts: { KILLED: killed, PENDING: 10_000 - killed },
    spec: { ...jobOf().spec, tasks: 10_000 },
    tasks: [],
  })
}

test("job cancel waits until the job is CANCELLED, saying how far it got meanwhile", async () => {
  const res = await run(["job", "cancel", "job-1"], {
    tty: true,
    routes: {
      "POST /v1/jobs/job-1/cancel": () => ({ status: 202, body: cancelling(0) }),
      "GET /v1/jobs/job-1": ({ n }) => ({
        body: n === 1 ? cancelling(4_000) : cancelling(10_000, "CANCELLED"),
      }),
    },
  })
  expect(res.code, res.stderr).toBe(0)
  expect(res.stderr).toContain("cancelling job job-1: 4000 of 10000 tasks ended (4000 killed)")
  expect(res.stdout).toBe("job job-1 CANCELLED: 10000 of 10000 tasks ended (10000 killed)\n")
  expect(res.requests.filter((r) => r.method === "GET")).toHaveLength(2)
})

test("job cancel --no-wait returns once the cancel is recorded", async () => {
  const res = await run(["job", "cancel", "job-1", "--no-wait"], {
    tty: true,
    routes: { "POST /v1/jobs/job-1/cancel": () => ({ status: 202, body: cancelling(0) }) },
  })
  expect(res.code, res.stderr).toBe(0)
  expect(res.stdout).toMatch(/^cancel requested for job job-1 \(PENDING, 0 of 10000 tasks ended/)
  expect(res.stdout).toContain("swarmplane job status job-1 --watch")
  expect(res.requests.map((r) => r.method)).toEqual(["POST"])
})

test("job cancel --timeout gives up waiting with exit 7; the cancel goes on", async () => {
  const res = await run(["job", "cancel", "job-1", "--timeout", "1"], {
    routes: {
      "POST /v1/jobs/job-1/cancel": () => ({ status: 202, body: cancelling(0) }),
      "GET /v1/jobs/job-1": () => ({ body: cancelling(1_000) }),
    },
  })
  expect(res.code).toBe(7)
  expect(res.stderr).toMatch(/timed out after 1 s waiting for job job-1 to be cancelled \(1000 of 10000/)
  expect(res.stderr).toContain("the cancel goes on")
})

test("job cancel of a job that already ended says so and waits for nothing", async () => {
  const res = await run(["job", "cancel", "job-1"], {
    tty: true,
    routes: { "POST /v1/jobs/job-1/cancel": () => ({ status: 202, body: jobOf() }) },
  })
  expect(res.code).toBe(0)
  expect(res.stdout).toBe("job job-1 already ended SUCCEEDED: nothing to cancel\n")
  expect(res.requests.map((r) => r.method)).toEqual(["POST"])
})
