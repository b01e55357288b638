import { expect, test } from "vitest"
import { warnOnChange } from "./log-on-change"
import { memoryLogger } from "./logger"

test("a failure that repeats is logged once, a new one again, and the recovery once", () => {
  const logger = memoryLogger()
  for (let i = 0; i < 5; i++) warnOnChange(logger, "backend p/hpc", "connection refused")
  warnOnChange(logger, "backend p/hpc", "no SSH handshake within 15s")
  warnOnChange(logger, "backend p/hpc", undefined)
  warnOnChange(logger, "backend p/hpc", undefined)
  expect(logger.entries.map((e) => [e.level, e.message])).toEqual([
    ["warn", "backend p/hpc: connection refused"],
    ["warn", "backend p/hpc: no SSH handshake within 15s"],
    ["info", "backend p/hpc: recovered"],
  ])
})
