/** Rendering: compact tables, colour rules, formats, durations, the progress bar and the live progress line. */
import { describe, expect, test } from "vitest"
import {
  age,
  bar,
  block,
  colorEnabled,
  detailText,
  duration,
  formatted,
  paint,
  parseFormat,
  state,
  table,
} from "./output"
import { progress } from "./progress"

const plain = paint(false)

describe("a backend's status detail", () => {
  test("nested records as indented lines, flat records as a table, words on one line, nothing as (none)", () => {
    const text = detailText(plain, {
      clusterName: "ml-prod",
      cluster: { status: "ACTIVE", version: "1.31" },
      localQueueStatus: { pending: 3, admitted: 1 },
      clusterQueue: {
        name: "cq",
        flavors: [
          { name: "default-flavor", resource: "cpu", used: "2", quota: "8" },
          { name: "gpu-flavor", resource: "nvidia.com/gpu", used: "1", quota: "4" },
        ],
        cohorts: [],
      },
      partitions: ["debug", "gpu"],
      skipped: undefined,
    })
    expect(text).toBe(
      [
        "clusterName: ml-prod",
        "cluster:",
        "  status: ACTIVE",
        "  version: 1.31",
        "localQueueStatus:",
        "  pending: 3",
        "  admitted: 1",
        "clusterQueue:",
        "  name: cq",
        "  flavors:",
        "    NAME             RESOURCE         USED   QUOTA",
        "    default-flavor   cpu              2      8",
        "    gpu-flavor       nvidia.com/gpu   1      4",
        "  cohorts: (none)",
        "partitions: debug, gpu",
        "",
      ].join("\n"),
    )
  })
})

describe("tables", () => {
  test("compact, kubectl-style: no borders, upper-case header, aligned, no trailing spaces", () => {
    const text = table(
      plain,
      ["name", "phase", "url"],
      [
        ["demo", "RUNNING", "http://127.0.0.1:9000"],
        ["a-much-longer-name", "PENDING", undefined],
      ],
    )
    expect(text).toBe(
      [
        "NAME                 PHASE     URL",
        "demo                 RUNNING   http://127.0.0.1:9000",
        "a-much-longer-name   PENDING   -",
        "",
      ].join("\n"),
    )
  })

  test("no colour codes without colour, colour codes with it", () => {
    expect(table(plain, ["s"], [[state(plain, "FAILED")]])).not.toContain("\x1b[")
    const colour = paint(true)
    expect(table(colour, ["s"], [[state(colour, "FAILED")]])).toContain("\x1b[31mFAILED\x1b[39m")
  })

  test("key/value blocks align labels and skip empty values", () => {
    expect(
      block(plain, [
        ["Name", "demo"],
        ["Endpoint", undefined],
        ["Phase", "RUNNING"],
      ]),
    ).toBe("Name:  demo\nPhase: RUNNING\n")
  })
})

describe("colour", () => {
  test.each([
    [true, {}, true],
    [false, {}, false],
    [true, { NO_COLOR: "1" }, false],
    [true, { TERM: "dumb" }, false],
    [false, { FORCE_COLOR: "1" }, true],
    [true, { NO_COLOR: "1", FORCE_COLOR: "1" }, false],
  ])("tty %s with %j: %s", (tty, env, want) => {
    expect(colorEnabled(tty, env)).toBe(want)
  })
})

describe("formats", () => {
  const value = { name: "demo", replicas: 2, args: ["--a"] }
  test("json is the object, 2-space indented", () => {
    expect(formatted("json", value, () => "table")).toBe(`${JSON.stringify(value, null, 2)}\n`)
  })
  test("yaml is the object", () => {
    expect(formatted("yaml", value, () => "table")).toBe("name: demo\nreplicas: 2\nargs:\n  - --a\n")
  })
  test("table renders the view", () => {
    expect(formatted("table", value, () => "table")).toBe("table")
  })
  test("an unknown format is a usage error", () => {
    expect(() => parseFormat("xml")).toThrow(/not one of table, json, yaml/)
  })
})

test.each([
  [0, "0s"],
  [45_000, "45s"],
  [185_000, "3m5s"],
  [1_800_000, "30m"],
  [7_500_000, "2h5m"],
  [90_000_000, "1d"],
])("duration(%d) is %s", (ms, text) => {
  expect(duration(ms)).toBe(text)
})

test("age of a time", () => {
  expect(age("2024-01-01T00:00:00Z", Date.parse("2024-01-01T00:02:00Z"))).toBe("2m")
  expect(age(undefined)).toBe("-")
})

test("the progress bar splits its cells by outcome", () => {
  expect(bar(plain, { done: 2, failed: 1, running: 1, total: 4 }, 8)).toBe("[██████▒▒]")
  expect(bar(plain, { done: 1, failed: 0, running: 1, total: 4 }, 8)).toBe("[██▒▒░░░░]")
})

describe("progress", () => {
  test("off a terminal: one line per change", () => {
    const written: string[] = []
    const p = progress({ write: (t) => void written.push(t), isTTY: false }, plain)
    p.update("PENDING")
    p.update("PENDING")
    p.update("RUNNING")
    p.done()
    expect(written).toEqual(["PENDING\n", "RUNNING\n"])
  })

  test("on a terminal: one line redrawn in place, cleared at the end", () => {
    const written: string[] = []
    const p = progress({ write: (t) => void written.push(t), isTTY: true, columns: 40 }, plain, () => 0)
    p.update("swarm demo: INITIALIZING, 1/2 replicas ready and more words")
    p.done()
    expect(written[0]?.startsWith("\r\x1b[2K")).toBe(true)
    expect(written[0]).toMatch(/\S+ swarm demo: INITIALIZING, 1\/2 rep… 0s$/)
    expect(written.at(-1)).toBe("\r\x1b[2K")
    expect(written.join("")).not.toContain("\n")
  })
})
