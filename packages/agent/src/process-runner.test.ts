import { existsSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { LogRing } from "./log-ring"
import { groupAlive } from "./process-group"
import { attemptEnv, ProcessRun, resolveArgv } from "./process-runner"
import { livingSleeps, sleepMarker, waitFor } from "./testing/wait"

const runs: ProcessRun[] = []
const run = (argv: string[]) => {
  const p = new ProcessRun({ attemptUid: "att-1", argv })
  runs.push(p)
  return p
}
// A failed test must not leave its sleeps behind.
afterEach(() => {
  for (const p of runs.splice(0)) p.killNow()
})

describe("process runner", () => {
  const exits: Record<string, { argv: string[]; state: string; exitCode: number }> = {
    "exit 0 is SUCCEEDED": { argv: ["sh", "-c", "exit 0"], state: "SUCCEEDED", exitCode: 0 },
    "exit 3 is FAILED 3": { argv: ["sh", "-c", "exit 3"], state: "FAILED", exitCode: 3 },
    "death by a signal is FAILED 128+n": {
      argv: ["sh", "-c", "kill -KILL $$"],
      state: "FAILED",
      exitCode: 137,
    },
    "a missing program is FAILED 127": { argv: ["no-such-program-here"], state: "FAILED", exitCode: 127 },
  }
  for (const [name, tc] of Object.entries(exits))
    it(name, async () => {
      const outcome = await run(tc.argv).done
      expect(outcome).toMatchObject({ state: tc.state, exitCode: tc.exitCode })
      if (tc.state === "FAILED") expect(outcome.message).toBeTruthy()
    })

  it("fails a command that cannot even be spawned (a NUL byte) instead of throwing", async () => {
    expect(await run(["sh", "-c", "echo \u0000"]).done).toMatchObject({ state: "FAILED", exitCode: 127 })
  })

  it("says why a command could not start, in the outcome and the log", async () => {
    const p = run(["no-such-program-here", "x"])
    const outcome = await p.done
    expect(outcome.message).toContain("no-such-program-here")
    expect(outcome.message).toContain("ENOENT")
    expect(p.logs.text()).toContain("could not start")
  })

  it("runs with the attempt's env, ATTEMPT_UID, PORT and a few harmless variables of the agent, nothing else", async () => {
    const base = {
      PATH: process.env.PATH,
      HOME: "/home/agent",
      LC_ALL: "C",
      SWARMPLANE_TOKEN: "secret-token",
      SWARMPLANE_ADMIN_KEY: "secret-admin",
      AWS_SECRET_ACCESS_KEY: "secret-aws",
      KEEP: "not passed",
      HOST: "base",
    }
    const p = new ProcessRun(
      {
        attemptUid: "att-env",
        argv: ["sh", "-c", "env"],
        env: { MINE: "1", ATTEMPT_UID: "spoofed" },
        defaults: { HOST: "0.0.0.0" },
        port: 4321,
      },
      base,
    )
    expect((await p.done).state).toBe("SUCCEEDED")
    // What the shell sets itself aside.
    const names = p.logs
      .text()
      .split("\n")
      .filter((l) => l.includes("=") && !/^(PWD|OLDPWD|SHLVL|_)=/.test(l))
    expect(names.sort()).toEqual(
      [
        "ATTEMPT_UID=att-env",
        "HOME=/home/agent",
        "HOST=0.0.0.0",
        "LC_ALL=C",
        "MINE=1",
        `PATH=${process.env.PATH}`,
        "PORT=4321",
      ].sort(),
    )
    expect(p.logs.text()).not.toContain("secret")
  })

  it("passes the agent's variables named by passEnv (NAME or PREFIX_*), never its token", () => {
    const env = attemptEnv(
      { HF_HOME: "/models", NCCL_DEBUG: "INFO", NCCL_IB: "1", OTHER: "x", SWARMPLANE_TOKEN: "t" },
      { attemptUid: "a", argv: ["x"], passEnv: ["HF_HOME", "NCCL_*", "SWARMPLANE_TOKEN"] },
    )
    expect(env).toEqual({ HF_HOME: "/models", NCCL_DEBUG: "INFO", NCCL_IB: "1", ATTEMPT_UID: "a" })
  })

  it("records the process group before the command runs, and forgets it once the group is gone", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sp-gate-"))
    const ran = join(dir, "ran")
    let ranWhenTracked: boolean | undefined
    let forgotten = false
    const p = new ProcessRun({
      attemptUid: "att-gate",
      argv: ["sh", "-c", `touch ${ran}`],
      track: (pgid) => {
        ranWhenTracked = existsSync(ran)
        expect(groupAlive(pgid)).toBe(true)
        return () => {
          forgotten = true
        }
      },
    })
    runs.push(p)
    expect(await p.done).toMatchObject({ state: "SUCCEEDED" })
    expect(ranWhenTracked).toBe(false)
    expect(existsSync(ran)).toBe(true)
    await waitFor("the record to be forgotten", () => forgotten)
  })

  it("never runs a command whose group could not be recorded: FAILED 125, saying why", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sp-gate-"))
    const ran = join(dir, "ran")
    const p = new ProcessRun({
      attemptUid: "att-norecord",
      argv: ["sh", "-c", `touch ${ran}`],
      track: () => {
        throw new Error("disk full")
      },
    })
    runs.push(p)
    const outcome = await p.done
    expect(outcome).toMatchObject({ state: "FAILED", exitCode: 125 })
    expect(outcome.message).toContain("could not record the attempt's process group: disk full")
    expect(existsSync(ran)).toBe(false)
  })

  it("runs a relative program from the attempt's working folder, and says when one is not executable", async () => {
    const dir = mkdtempSync(join(tmpdir(), "sp-cwd-"))
    writeFileSync(join(dir, "run.sh"), "#!/bin/sh\npwd\n", { mode: 0o755 })
    writeFileSync(join(dir, "plain.txt"), "not a program", { mode: 0o644 })
    const ok = new ProcessRun({ attemptUid: "att-cwd", argv: ["./run.sh"], cwd: dir })
    runs.push(ok)
    expect(await ok.done).toMatchObject({ state: "SUCCEEDED" })
    expect(ok.logs.text().trim()).toBe(dir)
    const denied = new ProcessRun({ attemptUid: "att-noexec", argv: ["./plain.txt"], cwd: dir })
    runs.push(denied)
    expect(await denied.done).toMatchObject({ state: "FAILED", exitCode: 126 })
  })

  it("lets the attempt's env override the agent's defaults but not ATTEMPT_UID", () => {
    const env = attemptEnv(
      { SWARMPLANE_TOKEN: "t" },
      {
        attemptUid: "a",
        argv: ["x"],
        defaults: { HOST: "0.0.0.0" },
        env: { HOST: "127.0.0.1", ATTEMPT_UID: "b" },
      },
    )
    expect(env).toEqual({ HOST: "127.0.0.1", ATTEMPT_UID: "a" })
  })

  it("keeps the last 200 lines of stdout and stderr together", async () => {
    const p = run([
      "sh",
      "-c",
      'i=0; while [ $i -lt 500 ]; do echo "out $i"; i=$((i+1)); done; echo "err last" >&2',
    ])
    await p.done
    const lines = p.logs.text().trimEnd().split("\n")
    expect(lines).toHaveLength(200)
    expect(lines[0]).toBe("out 301")
    expect(lines.at(-1)).toBe("err last")
  })

  it("stops the whole process group: nothing of `sleep & sleep` is left", async () => {
    const marker = sleepMarker()
    const p = run(["sh", "-c", `sleep ${marker} & sleep ${marker}`])
    await waitFor("both sleeps", () => livingSleeps(marker).length === 2)
    const outcome = await p.stop(5000)
    expect(outcome.state).toBe("KILLED")
    expect(livingSleeps(marker)).toEqual([])
  })

  it("sends SIGKILL after the grace to a group that ignores SIGTERM", async () => {
    const marker = sleepMarker()
    const p = run(["sh", "-c", `trap '' TERM; sleep ${marker} & sleep ${marker}`])
    await waitFor("both sleeps", () => livingSleeps(marker).length === 2)
    const outcome = await p.stop(300)
    expect(outcome).toMatchObject({ state: "KILLED", exitCode: 137 })
    expect(livingSleeps(marker)).toEqual([])
    expect(p.logs.text()).toContain("sending SIGKILL")
  })

  it("stops what a finished command left behind, keeping its outcome", async () => {
    const marker = sleepMarker()
    const p = run(["sh", "-c", `sleep ${marker} >/dev/null 2>&1 & exit 0`])
    expect(await p.done).toMatchObject({ state: "SUCCEEDED", exitCode: 0 })
    await waitFor("the straggler to be stopped", () => livingSleeps(marker).length === 0)
    expect(await p.stop()).toMatchObject({ state: "SUCCEEDED" })
  })

  it("runs the agent itself for a command starting with swarmplane-agent", async () => {
    const argv = resolveArgv(["swarmplane-agent", "echo-server", "--help"])
    expect(argv[0]).toBe(process.execPath)
    expect(argv[1]).toMatch(/packages\/agent\/bin\/swarmplane-agent\.mjs$/)
    const p = run(["swarmplane-agent", "echo-server", "--help"])
    expect(await p.done).toMatchObject({ state: "SUCCEEDED", exitCode: 0 })
    expect(p.logs.text()).toContain("swarmplane-agent echo-server")
  })
})

describe("log ring", () => {
  it("joins lines split across chunks and keeps the unfinished last line", () => {
    const ring = new LogRing({ maxLines: 3 })
    ring.write("a\nb")
    ring.write("c\nd\ne\nf")
    expect(ring.text()).toBe("d\ne\nf")
    expect(ring.text().split("\n")).toEqual(["d", "e", "f"])
  })

  it("keeps at most maxBytes, cut at a line start", () => {
    const ring = new LogRing({ maxLines: 1000, maxBytes: 100 })
    for (let i = 0; i < 50; i++) ring.write(`line ${i}\n`)
    const text = ring.text()
    expect(text.length).toBeLessThanOrEqual(100)
    expect(text.startsWith("line ")).toBe(true)
    expect(text.endsWith("line 49\n")).toBe(true)
    expect(ring.text(20)).toBe("line 48\nline 49\n")
  })

  it("counts versions so a reader can tell what changed", () => {
    const ring = new LogRing()
    const v = ring.version
    ring.write("")
    expect(ring.version).toBe(v)
    ring.write("x")
    expect(ring.version).toBe(v + 1)
  })
})
