import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, test } from "vitest"
import {
  parseProgressSection,
  parseSubmitBatch,
  progressOf,
  reconcileCommand,
  Section,
  sections,
  submitBatchCommand,
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

describe("a batch of submissions in one exec", () => {
  /**
   * Fake Slurm tools: squeue lists `sp-s-old` as job 41; sbatch keeps each script it is given, refuses
   * one that asks for partition `nope` (on stderr, exit 1), warns on stderr and answers the next id.
   */
  const run = (submissions: Parameters<typeof submitBatchCommand>[0], delimiter = "SWARMPLANE_EOF_1a2b") => {
    const dir = mkdtempSync(join(tmpdir(), "swarmplane-batch-"))
    const tool = (name: string, body: string) => {
      writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`)
      execFileSync("chmod", ["+x", join(dir, name)])
    }
    tool("squeue", `case "$*" in *--name=sp-s-old*) echo 41 ;; esac`)
    tool("sacct", "echo 'JobID|JobName|State|ExitCode|End'")
    tool(
      "sbatch",
      [
        `n=$(($(cat ${dir}/count 2>/dev/null || echo 100) + 1)); echo $n > ${dir}/count`,
        `cat > ${dir}/script-$n`,
        `if grep -q 'partition=nope' ${dir}/script-$n; then echo 'sbatch: error: invalid partition specified: nope' >&2; exit 1; fi`,
        `echo 'sbatch: warning: a warning on stderr' >&2`,
        "echo $n",
      ].join("\n"),
    )
    const stdout = execFileSync("sh", ["-c", submitBatchCommand(submissions, join(dir, "out"), delimiter)], {
      encoding: "utf8",
      env: { PATH: `${dir}:${process.env.PATH}` },
    })
    const scripts = (n: number) => readFileSync(join(dir, `script-${n}`), "utf8")
    return { results: parseSubmitBatch(stdout), scripts }
  }

  test("each submission gets its own id, refusal or adoption, and sbatch gets each script as written", () => {
    const tricky = "#!/bin/bash\n#SBATCH --job-name=sp-s-a\necho \"$HOME\" '$(id)' `date` \\\nEOF\n"
    const { results, scripts } = run([
      { name: "sp-s-a", firstTry: true, script: tricky },
      { name: "sp-s-b", firstTry: true, script: "#!/bin/bash\n#SBATCH --partition=nope\ntrue\n" },
      { name: "sp-s-old", firstTry: false, script: "#!/bin/bash\ntrue\n" },
      { name: "sp-s-c", firstTry: false, script: "#!/bin/bash\ntrue" },
    ])
    expect(results.get(0)).toEqual({ code: 0, stdout: "101", stderr: "sbatch: warning: a warning on stderr" })
    expect(scripts(101)).toBe(tricky)
    expect(results.get(1)).toMatchObject({
      code: 1,
      stderr: "sbatch: error: invalid partition specified: nope",
    })
    expect(results.get(2)).toMatchObject({ code: 0, stdout: "adopted 41" })
    expect(results.get(3)).toMatchObject({ code: 0, stdout: "103" })
    expect(scripts(103)).toBe("#!/bin/bash\ntrue\n")
  })

  test("a script holding the delimiter line is refused before anything runs", () => {
    expect(() =>
      submitBatchCommand(
        [{ name: "x", firstTry: true, script: "a\nSWARMPLANE_EOF_1\nb" }],
        "/o",
        "SWARMPLANE_EOF_1",
      ),
    ).toThrow(/delimiter/)
  })

  test("output cut off mid-batch gives the submissions that finished, not the others", () => {
    const out = [
      "@@swarmplane:submit:begin:0",
      "7",
      "@@swarmplane:submit:stderr:0",
      "",
      "@@swarmplane:submit:exit:0:0",
      "@@swarmplane:submit:begin:1",
      "8",
    ].join("\n")
    const results = parseSubmitBatch(out)
    expect([...results.keys()]).toEqual([0])
    expect(results.get(0)).toEqual({ code: 0, stdout: "7", stderr: "" })
  })
})
