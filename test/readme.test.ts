/**
 * The README works as written: the quick start is exactly the two commands, `.ci/run` runs the same
 * test command, and the curl walk-through runs against a real local control plane (only `API` and
 * `KEY` are pointed at the instance this test starts).
 */
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, expect, test } from "vitest"
import { freshDirs, killStarted, root, startLocal } from "./support/local"

afterEach(killStarted)
const readme = readFileSync(join(root, "README.md"), "utf8")

function block(after: string): string {
  const start = readme.indexOf(after)
  expect(start, `README has a section "${after}"`).toBeGreaterThan(-1)
  const match = /```sh\n([\s\S]*?)```/.exec(readme.slice(start))
  return match?.[1] ?? ""
}

test("the quick start is exactly `npm start` and `npm test`, and .ci/run runs the same test command", () => {
  const commands = block("## Quick start")
    .split("\n")
    .map((l) => l.replace(/#.*/, "").trim())
    .filter(Boolean)
  expect(commands).toEqual(["npm start", "npm test"])
  const ci = readFileSync(join(root, ".ci/run"), "utf8")
  expect(ci.split("\n").filter((l) => /^\s*npm test\s*$/.test(l))).toHaveLength(1)
})

test("the curl walk-through works as written", { timeout: 180_000 }, async () => {
  const dirs = freshDirs()
  const local = await startLocal(dirs)
  try {
    const url = local.url
    const key = readFileSync(join(dirs.SWARMPLANE_DATA_DIR, "admin-key"), "utf8").trim()
    const script = block("## Walk-through with curl")
    expect(script).toMatch(/^API=http:\/\/127\.0\.0\.1:8787$/m)
    expect(script).toMatch(/^KEY=\$\(cat \.swarmplane\/admin-key\)$/m)
    const pointed = script.replace(/^API=.*$/m, `API=${url}`).replace(/^KEY=.*$/m, `KEY=${key}`)
    const out = execFileSync("bash", ["-euo", "pipefail", "-c", pointed], { cwd: root, encoding: "utf8" })
    expect(out).toMatch(/"status":"ok"/)
    expect(out).toMatch(/"project":"default","role":"admin"/)
    expect(out).toMatch(/^local: worker-daemon, workers$/m)
    expect(out).toMatch(/^PENDING$/m)
    expect(out).toMatch(/^echo: hello$/m)
    expect(out).toMatch(/^SUCCEEDED \{"SUCCEEDED":4\}$/m)
    // The 4 shards ran side by side next to the swarm: placed in one pass, not one after another.
    const auth = { Authorization: `Bearer ${key}` }
    const jobs = (await fetch(`${url}/v1/jobs`, { headers: auth }).then((r) => r.json())) as {
      items: { id: string; spec: { name: string } }[]
    }
    const hello = jobs.items?.find((j) => j.spec.name === "hello")
    expect(hello, JSON.stringify(jobs)).toBeDefined()
    const detail = (await fetch(`${url}/v1/jobs/${hello!.id}`, { headers: auth }).then((r) => r.json())) as {
      tasks: { attempts: { createdAt: string }[] }[]
    }
    expect(new Set(detail.tasks.map((t) => t.attempts[0]!.createdAt)).size).toBe(1)
    expect(out).toMatch(
      /^0: SUCCEEDED, 1 attempt\(s\)\n1: SUCCEEDED, 1 attempt\(s\)\n2: SUCCEEDED, 1 attempt\(s\)\n3: SUCCEEDED, 1 attempt\(s\)$/m,
    )
    expect(out).toMatch(/^shard 2 of 4 against http:\/\/127\.0\.0\.1:\d+$/m)
    expect(out).toMatch(/^task job-\w+\/3: PENDING -> ASSIGNED$/m)
    // The job's own events: its creation, always; its end is recorded by the pass after its tasks end,
    // which may come after the walk-through has read the job as SUCCEEDED (a job's status is read
    // from its tasks), so it is not waited for here.
    expect(out).toMatch(/^job job-\w+: {2}-> PENDING$/m)
    expect(out).toMatch(/"code":"request.invalid".*"path":"tasks"/)
    expect(out).toMatch(/^deleted\nSTOPPED$/m)
    expect(out).toMatch(/"code":"job.not_found"/)
  } finally {
    await local.stop()
  }
})
