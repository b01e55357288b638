/**
 * Attempts in namespaces, on this machine: the hidden paths look empty and stay so, /proc shows the
 * attempt's own processes only (not the agent, not its secrets), a stop still reaches the task, and
 * nothing outlives the namespace. Each variant that works here is tested; the plain run is the control
 * that shows the same probes do find the secrets when nothing hides them.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { chownSync, mkdirSync, mkdtempSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { ProcessRun } from "./process-runner"
import {
  detectSandbox,
  hiddenPathIssue,
  namespaceSandbox,
  plainSandbox,
  type Sandbox,
  type Variant,
  variants,
} from "./sandbox"
import { lookUpUser } from "./task-user"
import { livingSleeps, sleepMarker, waitFor } from "./testing/wait"

const secret = `sp-secret-${Math.random().toString(36).slice(2)}`
const dir = mkdtempSync(join(tmpdir(), "sp-sandbox-"))
// A folder holding a secret, as the control plane's data folder does, and a token file.
const data = join(dir, "data")
mkdirSync(data)
writeFileSync(join(data, "admin-key"), `${secret}\n`)
const keyFile = join(dir, "token")
writeFileSync(keyFile, `${secret}\n`)
const hide = [data, keyFile]
const reversed = [...secret].reverse().join("")

/** The variants that work on this machine. */
const working = variants(process.getuid?.() === 0).filter((v) => {
  try {
    detectSandbox({ mode: "namespaces", hide: [], tryVariants: [v] })
    return true
  } catch {
    return false
  }
})
if (working.length === 0 && process.env.SWARMPLANE_REQUIRE_NAMESPACES === "1")
  throw new Error("no namespace variant works here, and SWARMPLANE_REQUIRE_NAMESPACES=1")

const runs: ProcessRun[] = []
const others: ChildProcess[] = []
afterEach(() => {
  for (const p of runs.splice(0)) p.killNow()
})
afterAll(() => {
  for (const c of others.splice(0)) c.kill("SIGKILL")
})

function run(sandbox: Sandbox, script: string, env: Record<string, string> = {}): ProcessRun {
  const p = new ProcessRun({ attemptUid: "att-sb", argv: ["sh", "-c", script], sandbox, env, cwd: dir })
  runs.push(p)
  return p
}

/** A process of the agent's user outside the sandbox with the secret in its environment and argv. */
async function decoy(): Promise<void> {
  const marker = sleepMarker()
  // The shell stays (it has more to do after the sleep), with the secret in its argv and environment.
  const child = spawn("sh", ["-c", `sleep ${marker}; : ${secret}`], {
    env: { PATH: process.env.PATH ?? "", DECOY_SECRET: secret },
    stdio: "ignore",
  })
  others.push(child)
  await waitFor("the decoy", () => livingSleeps(marker).length === 1)
}

/** Everything a task can try to get at the secrets. */
const snoop = [
  `cat "${keyFile}"`,
  `ls -A "${data}"`,
  `cat "${data}"/* 2>/dev/null`,
  `umount "${data}" 2>/dev/null; umount "${keyFile}" 2>/dev/null; cat "${keyFile}"`,
  // Searched for reversed in the reversed text: the secret itself is in no argv of the sandbox.
  `cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | rev | grep -c ${reversed}`,
  `cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' ' | rev | grep -c ${reversed}`,
  "echo done",
].join("; ")

function name(v: Variant): string {
  return `${v.outer === "user" ? "user namespace" : "as root"}, ${v.drop === "user" ? "mapped back to this user" : "no capabilities"}`
}

describe("no sandbox (the control)", () => {
  it("a task can read the secrets: what the sandbox must prevent", async () => {
    await decoy()
    const p = run(plainSandbox("none"), snoop)
    await p.done
    expect(p.logs.text()).toContain(secret)
    // And the agent's user's other processes, with what is in their environment and argv.
    expect(p.logs.text().match(/^\d+$/gm)?.map(Number)).toEqual([expect.any(Number), expect.any(Number)])
    expect(
      p.logs
        .text()
        .match(/^\d+$/gm)
        ?.every((n) => Number(n) > 0),
    ).toBe(true)
  })
})

describe.skipIf(working.length === 0).each(working)("namespaces ($outer, $drop)", (variant) => {
  const sandbox = namespaceSandbox(hide, variant)

  it(`hides the paths for good and shows no other process (${name(variant)})`, async () => {
    await decoy()
    const p = run(sandbox, snoop)
    expect(await p.done).toMatchObject({ state: "SUCCEEDED" })
    const text = p.logs.text()
    expect(text).toContain("done")
    expect(text).not.toContain(secret)
    // The grep counts: no process whose environment or argv holds the secret is visible.
    expect(text.match(/^\d+$/gm)).toEqual(["0", "0"])
  })

  it("runs as this user, in the attempt's working folder, with pid 1 of its own", async () => {
    const p = run(sandbox, 'id -u; pwd; tr "\\0\\n" "  " < /proc/1/cmdline')
    expect(await p.done).toMatchObject({ state: "SUCCEEDED" })
    const [uid, cwd, init] = p.logs.text().split("\n")
    if (variant.drop === "user") expect(uid).toBe(String(process.getuid?.()))
    expect(cwd).toBe(dir)
    expect(init).toContain("swarmplane-sandbox")
  })

  it("a stop's SIGTERM reaches the task, and its whole tree ends", async () => {
    const marker = sleepMarker()
    const p = run(sandbox, `trap 'echo got TERM; exit 0' TERM; sleep ${marker} & sleep ${marker} & wait`)
    await waitFor("both sleeps", () => livingSleeps(marker).length === 2)
    expect(await p.stop(5000)).toMatchObject({ state: "KILLED" })
    expect(p.logs.text()).toContain("got TERM")
    expect(livingSleeps(marker)).toEqual([])
  })

  it("exit codes are the task's; a death by signal n is 128+n and says so", async () => {
    expect(await run(sandbox, "exit 3").done).toMatchObject({ state: "FAILED", exitCode: 3 })
    expect(await run(sandbox, "kill -KILL $$").done).toMatchObject({
      state: "FAILED",
      exitCode: 137,
      message: "exited with code 137, as when killed by SIGKILL",
    })
  })

  it("nothing outlives the namespace: killing its leader alone kills every process in it", async () => {
    const marker = sleepMarker()
    const p = run(sandbox, `sleep ${marker} & setsid sleep ${marker} & wait`)
    await waitFor("both sleeps", () => livingSleeps(marker).length === 2)
    process.kill(p.pid ?? 0, "SIGKILL")
    await waitFor("the namespace's processes to end", () => livingSleeps(marker).length === 0, {
      timeoutMs: 5000,
    })
  })
})

describe.skipIf(process.getuid?.() !== 0)("--task-user (an agent running as root)", () => {
  const user = lookUpUser("nobody")
  if (typeof user === "string") throw new Error(user)
  const closed = join(dir, "closed")
  writeFileSync(closed, `${secret}\n`, { mode: 0o600 })

  for (const [how, sandbox] of [
    ["in namespaces", working.length ? detectSandbox({ mode: "namespaces", hide, user }) : undefined],
    ["without namespaces", plainSandbox("none", user)],
  ] as const)
    it.skipIf(!sandbox)(
      `runs the task as that user, with its HOME, in a folder it may write (${how})`,
      async () => {
        const work = mkdtempSync(join(tmpdir(), "sp-task-user-"))
        chownSync(work, user.uid, user.gid)
        const p = new ProcessRun({
          attemptUid: "att-user",
          argv: ["sh", "-c", `id -u; echo "$HOME $USER"; touch made-here && echo wrote; cat "${closed}"`],
          sandbox,
          cwd: work,
          user,
          env: {},
        })
        runs.push(p)
        await p.done
        const text = p.logs.text()
        expect(text.split("\n").slice(0, 3)).toEqual([String(user.uid), `${user.home} ${user.name}`, "wrote"])
        expect(text).toContain("Permission denied")
        expect(text).not.toContain(secret)
        expect(statSync(join(work, "made-here")).uid).toBe(user.uid)
      },
    )

  it("says a user that does not exist", () => {
    expect(lookUpUser("no-such-user-here")).toBe(
      '--task-user: there is no user "no-such-user-here" on this machine; give an existing user\'s name or uid',
    )
  })
})

describe("detection and checks", () => {
  it("says which isolation is in effect, and --isolation none turns it off", () => {
    const off = detectSandbox({ mode: "none", hide })
    expect(off.isolation).toBe("none")
    expect(off.summary).toMatch(
      /^namespace isolation is off \(--isolation none\): tasks run as \S+ with your files$/,
    )
    const auto = detectSandbox({ mode: "auto", hide })
    if (working.length > 0) {
      expect(auto.isolation).toBe("namespaces")
      expect(auto.summary).toBe(`tasks run in a private mount+pid namespace; hidden: ${hide.join(", ")}`)
    } else expect(auto.summary).toMatch(/^no namespace isolation available \(.+\): tasks run as/)
  })

  it("refuses to hide what tasks need, naming the flag", () => {
    const needed = { "the attempts' working folders": "/tmp/work", "this Node.js": "/usr/bin/node" }
    expect(hiddenPathIssue("/tmp", needed)).toBe(
      "--hide: /tmp holds the attempts' working folders (/tmp/work), which tasks need, and tasks do not see it; use a folder that does not",
    )
    expect(hiddenPathIssue("/", needed)).toContain("--hide: / holds")
    expect(hiddenPathIssue("relative/dir", needed)).toBe('--hide: "relative/dir" must be an absolute path')
    expect(hiddenPathIssue("/srv/plane-data", needed)).toBeUndefined()
    expect(hiddenPathIssue("/tmp/work-other", needed)).toBeUndefined()
  })
})
