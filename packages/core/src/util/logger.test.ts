import { expect, test } from "vitest"
import { jsonLogger, parseLogLevel } from "./logger"

const at = new Date("2026-12-02T10:00:00.000Z")

function capture(level?: Parameters<typeof jsonLogger>[0]["level"]) {
  const lines: string[] = []
  const logger = jsonLogger({ service: "swarmplane", level, write: (l) => lines.push(l), now: () => at })
  return { logger, lines, entries: () => lines.map((l) => JSON.parse(l)) }
}

test("one JSON line per entry, with level, message, time and service; secret-looking fields redacted", () => {
  const { logger, lines, entries } = capture()
  logger.info("backend a: pass ran", { project: "p", token: "sk-live-123", nested: { apiKey: "k" } })
  expect(lines).toHaveLength(1)
  expect(lines[0]).not.toContain("sk-live-123")
  expect(entries()[0]).toEqual({
    level: "INFO",
    message: "backend a: pass ran",
    timestamp: "2026-12-02T10:00:00.000Z",
    service: "swarmplane",
    project: "p",
    token: "[redacted]",
    nested: { apiKey: "[redacted]" },
  })
})

test("a field named like the entry's own keys does not replace them", () => {
  const { logger, entries } = capture()
  logger.warn("real message", { message: "spoofed", level: "DEBUG" })
  expect(entries()[0]).toMatchObject({ level: "WARN", message: "real message" })
})

test("entries under the level are dropped; silent drops all", () => {
  const warn = capture("warn")
  warn.logger.debug("d")
  warn.logger.info("i")
  warn.logger.warn("w")
  warn.logger.error("e")
  expect(warn.entries().map((e) => e.level)).toEqual(["WARN", "ERROR"])
  const silent = capture("silent")
  silent.logger.error("e")
  expect(silent.lines).toEqual([])
})

test("a field that cannot be serialised keeps the entry", () => {
  const { logger, entries } = capture()
  const cycle: Record<string, unknown> = {}
  cycle.self = cycle
  logger.error("failed", { count: 10n, cycle })
  expect(entries()[0]).toMatchObject({ level: "ERROR", message: "failed" })
})

test("levels as the environment names them", () => {
  expect(parseLogLevel("DEBUG")).toBe("debug")
  expect(parseLogLevel(" Info ")).toBe("info")
  expect(parseLogLevel("WARNING")).toBe("warn")
  expect(parseLogLevel("FATAL")).toBe("error")
  expect(parseLogLevel("SILENT")).toBe("silent")
  expect(parseLogLevel("loud")).toBeUndefined()
  expect(parseLogLevel(undefined)).toBeUndefined()
})
