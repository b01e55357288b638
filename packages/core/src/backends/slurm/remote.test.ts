import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, test } from "vitest"
import {
  parseProgressSection,
  progressOf,
  reconcileCommand,
  Section,
  sections,
  submitOrAdoptCommand,
} from "./remote"

describe("batch progress in the reconcile command", () => {
  test("the progress lines read each shard's file by attempt, skip missing ones, and parse back", () => {
    const dir = mkdtempSync(join(tmpdir(), "swarmplane-progress-"))
    mkdirSync(join(dir, "shard-0"))
    mkdirSync(join(dir, "shard 1"))
    const doc = { runId: "a-1", state: "running", total: 250, done: 100, failed: 2, retries: 7, skipped: 0 }
    writeFileSync(join(dir, "shard-0", "progress.json"), `${JSON.stringify(doc)}\n`)
    writeFileSync(join(dir, "shard 1", "progress.json"), `${JSON.stringify({ ...doc, runId: "a-2" })}\n`)
    const command = reconcileCommand(
      ["n"],
      ["1"],
      [
        { key: "a-1", path: join(dir, "shard-0", "progress.json") },
        { key: "a-2", path: join(dir, "shard 1", "progress.json") },
        { key: "a-3", path: join(dir, "shard-9", "progress.json") },
      ],
    )
    // Only the progress part runs here (the rest needs Slurm): from its marker on.
    const lines = command.split("\n")
    const tail = lines.slice(lines.indexOf(`echo ${Section.progress}`)).join("\n")
    const stdout = execFileSync("sh", ["-c", tail], { encoding: "utf8" })
    const docs = parseProgressSection(sections(stdout).progress)
    expect([...docs.keys()]).toEqual(["a-1", "a-2"])
    expect(progressOf(docs.get("a-1"), "a-1")).toEqual({ total: 250, done: 100, failed: 2, retries: 7 })
  })

  test("no batch task, no progress section", () => {
    expect(reconcileCommand(["n"], ["1"])).not.toContain(Section.progress)
  })

  test("a document of an earlier attempt of the shard, or a broken one, is not this attempt's progress", () => {
    expect(progressOf({ runId: "a-old", done: 5, failed: 0 }, "a-new")).toBeUndefined()
    expect(progressOf({ runId: "a-new", done: -1, failed: 0 }, "a-new")).toBeUndefined()
    expect(progressOf({ runId: "a_x", done: 5 }, "a/x")).toEqual({ done: 5, failed: 0 })
    expect([...parseProgressSection("a-1\t{not json\nno-tab\na-2\t[1]\n").keys()]).toEqual([])
  })
})

describe("submit or adopt", () => {
  /** Run the command with fake Slurm tools: squeue and sacct print what the case says, sbatch says 99. */
  const run = (tools: { squeue?: string; sacctX?: string; sacctC?: string }, firstTry = false) => {
    const dir = mkdtempSync(join(tmpdir(), "swarmplane-adopt-"))
    const tool = (name: string, body: string) => {
      writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`)
      execFileSync("chmod", ["+x", join(dir, name)])
    }
    tool("squeue", `printf '%b' ${JSON.stringify(tools.squeue ?? "")}`)
    tool(
      "sacct",
      `case " $* " in *" -X "*) ${tools.sacctX === undefined ? "echo 'Slurm accounting storage is disabled' >&2; exit 1" : `printf '%b' ${JSON.stringify(tools.sacctX)}`} ;; *) printf '%b' ${JSON.stringify(tools.sacctC ?? "JobID|JobName|State|ExitCode|End\\n")} ;; esac`,
    )
    tool("sbatch", "cat >/dev/null; echo 99")
    return execFileSync("sh", ["-c", submitOrAdoptCommand("sp-s-new", join(dir, "out"), { firstTry })], {
      input: "#!/bin/bash\n",
      encoding: "utf8",
      env: { PATH: `${dir}:${process.env.PATH}` },
    }).trim()
  }
  const header = "JobID|JobName|State|ExitCode|End\n"

  test("a name in the queue is adopted", () => {
    expect(run({ squeue: "41\n" })).toBe("adopted 41")
  })

  test("a name that left the queue is adopted from its history: slurmdbd's array id, or jobcomp's lowest id", () => {
    expect(run({ sacctX: `${header}57_0|sp-s-new|COMPLETED|0:0|x\n57_1|sp-s-new|COMPLETED|0:0|x\n` })).toBe(
      "adopted 57",
    )
    expect(
      run({
        sacctC: `${header}4|sp-s-old|COMPLETED|0:0|x\n8|sp-s-new|FAILED|1:0|x\n7|sp-s-new|COMPLETED|0:0|x\n`,
      }),
    ).toBe("adopted 7")
  })

  test("an attempt placed this very pass is submitted without looking for one to adopt", () => {
    // Even where the queue would list the name (it cannot, for a first try): no lookup, one sbatch.
    expect(run({ squeue: "41\n" }, true)).toBe("99")
    expect(submitOrAdoptCommand("sp-s-new", "/out", { firstTry: true })).not.toMatch(/squeue|sacct/)
  })

  test("jobcomp's log ignores --name: other submissions in it are never adopted, a new one is submitted", () => {
    expect(run({ sacctC: `${header}1|sp-s-other|COMPLETED|0:0|x\n2|wrap|COMPLETED|0:0|x\n` })).toBe("99")
    expect(run({})).toBe("99")
  })
})
