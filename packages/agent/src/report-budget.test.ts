import type { ObservedAttempt } from "@swarmplane/core/contract/worker"
import { describe, expect, it } from "vitest"
import { fitLogBudget } from "./report-budget"

const report = (attemptUid: string, state: ObservedAttempt["state"], size: number): ObservedAttempt => ({
  attemptUid,
  state,
  ...(size ? { logTail: "x".repeat(size) } : {}),
})

const kept = (reports: ObservedAttempt[]) =>
  reports.filter((r) => r.logTail !== undefined).map((r) => r.attemptUid)

describe("log budget of a heartbeat", () => {
  it("keeps everything that fits", () => {
    const reports = [report("a", "RUNNING", 10), report("b", "RUNNING", 10), report("c", "RUNNING", 0)]
    fitLogBudget(reports, 20)
    expect(kept(reports)).toEqual(["a", "b"])
  })

  it("sends finished attempts' tails first", () => {
    const reports = [report("a", "RUNNING", 10), report("b", "SUCCEEDED", 10), report("c", "FAILED", 10)]
    fitLogBudget(reports, 20)
    expect(kept(reports)).toEqual(["b", "c"])
  })

  it("rotates over running attempts so none starves", () => {
    const build = () => ["a", "b", "c"].map((uid) => report(uid, "RUNNING", 10))
    const seen = [0, 1, 2].map((rotation) => {
      const reports = build()
      fitLogBudget(reports, 10, rotation)
      return kept(reports)
    })
    expect(seen).toEqual([["a"], ["b"], ["c"]])
  })
})
