/**
 * `sst.config.ts` and `infra/*.ts` type-checked against SST's own component types
 * (`scripts/sst-typecheck.sh`, `npm run typecheck:infra`). Installing those types takes the npm
 * registry (about 425 MB into `.sst/`, once); without the registry and without them installed, this
 * is skipped with a line saying so, except under `.ci/run` (SWARMPLANE_REQUIRE_INFRA_TYPES=1), where
 * it must run.
 */
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { join, resolve } from "node:path"
import { expect, test } from "vitest"

const root = resolve(import.meta.dirname, "..")

function canCheck(): boolean {
  if (existsSync(join(root, ".sst/platform/node_modules/@pulumi/aws/package.json"))) return true
  const ping = spawnSync("npm", ["ping"], { cwd: root, timeout: 15_000, stdio: "ignore" })
  if (ping.status === 0) return true
  const how = "run `npm run typecheck:infra` where the npm registry can be reached"
  if (process.env.SWARMPLANE_REQUIRE_INFRA_TYPES === "1")
    throw new Error(
      `the infrastructure cannot be type-checked: SST's types are not installed and the npm registry does not answer; ${how}`,
    )
  console.warn(
    `skipping the infrastructure type-check: SST's types are not installed and the npm registry does not answer; ${how}`,
  )
  return false
}

test.runIf(canCheck())(
  "sst.config.ts and infra/ type-check against SST's component types",
  { timeout: 600_000 },
  () => {
    const run = spawnSync("bash", ["scripts/sst-typecheck.sh"], {
      cwd: root,
      encoding: "utf8",
      timeout: 590_000,
    })
    const output = `${run.stdout}${run.stderr}`
    console.log(
      output
        .trim()
        .split("\n")
        .filter((l) => l.startsWith("sst-typecheck:"))
        .join("\n"),
    )
    expect(run.status, output).toBe(0)
    expect(output).toMatch(/tsc: OK/)
  },
)
