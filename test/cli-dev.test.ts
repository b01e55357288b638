/**
 * `swarmplane dev` runs the local control plane as a child process (the program `npm start` runs),
 * from any folder: it serves and writes the `local` profile, a Ctrl-C (SIGINT to the CLI) stops the
 * plane, the CLI ends with the plane's exit code (a configuration error's included), and a CLI killed
 * outright does not leave the plane running.
 */
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, expect, test } from "vitest"
import { freshDirs, killStarted, root, startLocal } from "./support/local"

afterEach(killStarted)
const dev = {
  args: [join(root, "packages/cli/bin/swarmplane.mjs"), "dev"],
  cwd: mkdtempSync(join(tmpdir(), "sp-dev-")),
}

test("swarmplane dev serves until Ctrl-C, then exits 0", async () => {
  const dirs = freshDirs()
  const local = await startLocal(dirs, dev)
  const health = await fetch(`${local.url}/health`)
  expect(health.status).toBe(200)
  const config = JSON.parse(readFileSync(join(dirs.SWARMPLANE_CONFIG_DIR, "config.json"), "utf8"))
  expect(config.profiles.local.api).toBe(local.url)
  expect(await local.stop("SIGINT")).toBe(0)
  expect(local.output()).toContain("SIGINT: stopping")
  // The plane stopped with the CLI: nothing listens any more.
  await expect(fetch(`${local.url}/health`)).rejects.toThrow()
})

test("when the CLI is killed outright, the plane stops with it", async () => {
  const dirs = freshDirs()
  const local = await startLocal(dirs, dev)
  local.child.kill("SIGKILL")
  // The plane writes to the CLI's output: `exit` settles once the plane has stopped and let go of it.
  expect(await local.exit).toBe(null)
  expect(local.output()).toContain("the CLI exited: stopping")
  await expect(fetch(`${local.url}/health`)).rejects.toThrow()
})

test("a configuration error ends swarmplane dev with the plane's exit code", async () => {
  const started = startLocal({ ...freshDirs(), SWARMPLANE_PORT: "nope" }, dev)
  await expect(started).rejects.toThrow(
    /exited with 2 before it was ready:\n.*SWARMPLANE_PORT must be a port number/,
  )
})
