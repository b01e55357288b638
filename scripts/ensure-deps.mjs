#!/usr/bin/env node
/**
 * Pre-step of `npm start`, `npm test` and `npm run bench`: installs dependencies when they are
 * missing or stale, so either command works as the very first one on a fresh clone.
 *
 * "Stale" means the lockfile or any package.json changed since the last install this script
 * recorded (a hash kept in node_modules/.swarmplane-install). It uses only Node built-ins,
 * because it runs before anything is installed.
 *
 * `--stamp` only records the install that just happened: the root package's `postinstall` runs it, so
 * a plain `npm ci` or `npm install` also counts and the next `npm test` or `npm run bench` does not
 * install everything again.
 *
 * Then it builds the dashboard's browser bundle if its sources changed since the last build
 * (scripts/build-dashboard.mjs), since the API imports the module that build writes.
 */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const stampFile = join(root, "node_modules", ".swarmplane-install")
const inputs = [
  "package-lock.json",
  "package.json",
  "packages/core/package.json",
  "packages/cli/package.json",
  "packages/agent/package.json",
]

function fingerprint() {
  const hash = createHash("sha256")
  for (const file of inputs) {
    const path = join(root, file)
    hash.update(file)
    hash.update(existsSync(path) ? readFileSync(path) : "absent")
  }
  return hash.digest("hex")
}

if (process.argv.includes("--stamp")) {
  if (existsSync(dirname(stampFile))) writeFileSync(stampFile, `${fingerprint()}\n`)
  process.exit(0)
}

const wanted = fingerprint()
const have = existsSync(stampFile) ? readFileSync(stampFile, "utf8").trim() : ""
if (have === wanted) {
  await dashboard()
  process.exit(0)
}

const hasLock = existsSync(join(root, "package-lock.json"))
const args = hasLock
  ? ["ci", "--no-audit", "--no-fund", "--loglevel=error"]
  : ["install", "--no-audit", "--no-fund", "--loglevel=error"]
process.stderr.write(
  `swarmplane: dependencies are ${have ? "stale" : "missing"}; running npm ${args[0]} ...\n`,
)
const started = Date.now()
try {
  execFileSync(process.platform === "win32" ? "npm.cmd" : "npm", args, {
    cwd: root,
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true" },
  })
} catch (error) {
  process.stderr.write(
    `swarmplane: npm ${args[0]} failed (${error.status ?? error.message}); fix the error above and run the command again.\n`,
  )
  process.exit(1)
}
writeFileSync(stampFile, `${fingerprint()}\n`)
process.stderr.write(
  `swarmplane: dependencies installed in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
)
await dashboard()

/** Imported only here: the build needs esbuild, which is installed by now. */
async function dashboard() {
  try {
    const { ensureDashboard } = await import("./build-dashboard.mjs")
    if (await ensureDashboard()) process.stderr.write("swarmplane: built the dashboard bundle (/ui/app.js)\n")
  } catch (error) {
    process.stderr.write(
      `swarmplane: the dashboard bundle did not build (${error.message}); fix packages/core/src/api/dashboard/ui and run the command again.\n`,
    )
    process.exit(1)
  }
}
