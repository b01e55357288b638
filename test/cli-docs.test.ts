/**
 * The README's CLI walk-through works as written: it runs, unchanged, against a real local control
 * plane, with `swarmplane` being the CLI's launcher (as the doc's alias makes it) and the CLI finding
 * the control plane through the `local` profile the control plane wrote.
 */
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, expect, test } from "vitest"
import { freshDirs, killStarted, root, startLocal } from "./support/local"

afterEach(killStarted)
const doc = readFileSync(join(root, "docs/cli.md"), "utf8")
const readme = readFileSync(join(root, "README.md"), "utf8")

function walkThrough(): string {
  const start = readme.indexOf("\n## Walk-through with the CLI\n")
  expect(start, 'README.md has a "## Walk-through with the CLI" section').toBeGreaterThan(-1)
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(start))?.[1] ?? ""
  // Its first line makes `swarmplane` the checkout's CLI; the test runs the block unchanged.
  expect(block.split("\n")[0]).toMatch(
    /^swarmplane\(\) \{ node "\$PWD\/packages\/cli\/bin\/swarmplane\.mjs" "\$@"; \}/,
  )
  return block
}

function bash(script: string, env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const { SWARMPLANE_API: _a, SWARMPLANE_KEY: _k, SWARMPLANE_PROFILE: _p, ...outer } = process.env
  const child = spawn("bash", ["-euo", "pipefail", "-c", script], {
    cwd: root,
    env: { ...outer, NO_COLOR: "1", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  })
  let out = ""
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()))
  child.stderr.on("data", (chunk: Buffer) => (out += chunk.toString()))
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, out })))
}

test("the install section names both ways to run it", () => {
  expect(doc).toContain("npx swarmplane --help")
  expect(doc).toContain("node packages/cli/bin/swarmplane.mjs")
  expect(doc).toMatch(/alias swarmplane="node \$PWD\/packages\/cli\/bin\/swarmplane\.mjs"/)
})

test("the walk-through works as written", { timeout: 240_000 }, async () => {
  const dirs = freshDirs()
  const local = await startLocal(dirs)
  try {
    const script = walkThrough()
    expect(script).toMatch(/^swarmplane up -f /m)
    const { code, out } = await bash(script, {
      SWARMPLANE_CONFIG_DIR: dirs.SWARMPLANE_CONFIG_DIR,
    })
    expect(code, out).toBe(0)
    expect(out).toMatch(/^Profile:\s+local$/m)
    expect(out).toMatch(/^local\s+workers\s+worker-daemon/m)
    expect(out).toContain('ok: swarm "demo"')
    expect(out).toMatch(/^Phase:\s+RUNNING$/m)
    expect(out).toMatch(/^Ready:\s+2\/2 replicas$/m)
    expect(out).toMatch(/^Status:\s+SUCCEEDED$/m)
    expect(out).toMatch(/^shard 2 of 4 against http:\/\/127\.0\.0\.1:\d+$/m)
    expect(out).toMatch(/^job-\w+\s+job\s+SUCCEEDED\s+4\/4\s+demo\s+local/m)
    expect(out).toMatch(/^Rows: 200\/200 done \(100%\)/m)
    expect(out).toMatch(/^\s*200$/m)
    expect(out).toMatch(/"content":"echo: question \d+"/)
    expect(out).toMatch(/^Autoscaler:$/m)
    expect(out).toMatch(/broken\.yaml:1:7: name: must be a DNS label/)
    expect(out).toMatch(/broken\.yaml:3:11: replicas: must be at most 1024/)
    expect(out).toMatch(/^exit code 5$/m)
    expect(out).toMatch(/^Phase:\s+STOPPED$/m)
  } finally {
    await local.stop()
  }
})
