import { execFileSync } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { expect, test } from "vitest"
import { logsCommand, tailsOf } from "./logs"
import { submitResult } from "./submission"

test("many tasks' tails in one command: each file's own lines, a missing file empty, truncation told", () => {
  const dir = mkdtempSync(join(tmpdir(), "swarmplane-logs-"))
  writeFileSync(join(dir, "a.out"), "a1\na2\na3\n")
  writeFileSync(join(dir, "b c.out"), "b1\n")
  const files = [
    { attemptUid: "a-1", path: join(dir, "a.out") },
    { attemptUid: "a-2" },
    { attemptUid: "a-3", path: join(dir, "b c.out") },
    { attemptUid: "a-4", path: join(dir, "missing.out") },
  ]
  const stdout = execFileSync(
    "sh",
    [
      "-c",
      logsCommand(
        files.flatMap((f) => (f.path ? [f.path] : [])),
        2,
      ),
    ],
    {
      encoding: "utf8",
    },
  )
  expect(tailsOf(files, stdout, 2, "t")).toEqual([
    { attemptUid: "a-1", lines: ["a2", "a3"], truncated: true, updatedAt: "t" },
    { attemptUid: "a-2", lines: [], truncated: false },
    { attemptUid: "a-3", lines: ["b1"], truncated: false, updatedAt: "t" },
    { attemptUid: "a-4", lines: [], truncated: false, updatedAt: "t" },
  ])
})

test.each([
  ["submitted", { code: 0, stdout: "41\n", stderr: "" }, { jobId: "41", adopted: false }],
  [
    "submitted on a federation",
    { code: 0, stdout: "41;cluster2\n", stderr: "" },
    { jobId: "41", adopted: false },
  ],
  ["adopted", { code: 0, stdout: "adopted 17\n", stderr: "" }, { jobId: "17", adopted: true }],
  [
    "refused, in sbatch's words",
    { code: 1, stdout: "", stderr: "sbatch: error: invalid partition specified: gpu2\n" },
    { refused: "sbatch refused the job: sbatch: error: invalid partition specified: gpu2" },
  ],
  ["no id printed", { code: 0, stdout: "", stderr: "" }, { refused: "sbatch refused the job: exit 0" }],
])("submit-or-adopt output: %s", (_name, out, want) => {
  expect(submitResult(out)).toEqual(want)
})
