/**
 * The pre-step of `npm start`, `npm test` and `npm run bench` (scripts/ensure-deps.mjs) installs only when
 * the dependencies are missing or stale: an install the user ran themselves (`npm ci`, whose
 * `postinstall` records it) counts, so the next command does not install everything again; a changed
 * package.json does. Run in a scratch copy of the manifests with a stand-in `npm` that only notes it ran.
 */
import { execFileSync, spawnSync } from "node:child_process"
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, expect, test } from "vitest"

const root = join(import.meta.dirname, "..")
const manifests = [
  "package.json",
  "package-lock.json",
  "packages/core/package.json",
  "packages/cli/package.json",
  "packages/agent/package.json",
]
let dir: string
let marker: string

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "ensure-deps-"))
  for (const file of manifests) {
    mkdirSync(join(dir, file, ".."), { recursive: true })
    cpSync(join(root, file), join(dir, file))
  }
  mkdirSync(join(dir, "scripts"))
  cpSync(join(root, "scripts/ensure-deps.mjs"), join(dir, "scripts/ensure-deps.mjs"))
  // The dashboard step is not under test here: a stand-in that has nothing to build.
  writeFileSync(
    join(dir, "scripts/build-dashboard.mjs"),
    "export async function ensureDashboard() { return false }\n",
  )
  marker = join(dir, "npm-ran")
  const bin = join(dir, "bin")
  mkdirSync(bin)
  writeFileSync(join(bin, "npm"), `#!/bin/sh\necho "$@" >> "${marker}"\nmkdir -p node_modules\n`)
  chmodSync(join(bin, "npm"), 0o755)
})

afterAll(() => rmSync(dir, { recursive: true, force: true }))

const preStep = () =>
  spawnSync(process.execPath, ["scripts/ensure-deps.mjs"], {
    cwd: dir,
    env: { ...process.env, PATH: `${join(dir, "bin")}:${process.env.PATH}` },
    encoding: "utf8",
  })
const npmRuns = () => (existsSync(marker) ? readFileSync(marker, "utf8").trim().split("\n") : [])

test("the root package records any install in its postinstall", () => {
  const scripts = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts
  expect(scripts.postinstall).toBe("node scripts/ensure-deps.mjs --stamp")
})

test("after an install of the user's own, the pre-step installs nothing; after a manifest change it installs", () => {
  // What `npm ci` leaves: node_modules, and its postinstall's record.
  mkdirSync(join(dir, "node_modules"))
  execFileSync(process.execPath, ["scripts/ensure-deps.mjs", "--stamp"], { cwd: dir })
  const quiet = preStep()
  expect(quiet.status, quiet.stderr).toBe(0)
  expect(quiet.stderr).not.toMatch(/running npm/)
  expect(npmRuns()).toEqual([])

  const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"))
  manifest.description = `${manifest.description ?? ""} changed`
  writeFileSync(join(dir, "package.json"), JSON.stringify(manifest, null, 2))
  const stale = preStep()
  expect(stale.stderr).toMatch(/dependencies are stale; running npm ci/)
  expect(npmRuns()).toEqual([expect.stringMatching(/^ci /)])
  // And that install is recorded too: the next pre-step is quiet again.
  expect(preStep().stderr).not.toMatch(/running npm/)
  expect(npmRuns()).toHaveLength(1)
})
