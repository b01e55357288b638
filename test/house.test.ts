/**
 * The house's import rules (`.dependency-cruiser.cjs`, docs/architecture.md): each layer of core imports
 * only the layers below it, nothing imports in a circle, the CLI and the agent reach core only through
 * its wire contract. A new back-edge fails here, with the offending import named.
 */
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { expect, test } from "vitest"

test("imports follow the layers: no back-edge, no cycle, clients only through the contract", {
  timeout: 120_000,
}, async () => {
  const run = promisify(execFile)
  const result = await run(
    process.execPath,
    [
      "node_modules/dependency-cruiser/bin/dependency-cruise.mjs",
      "packages",
      "functions",
      "bench",
      "test",
      "scripts",
      "--config",
      ".dependency-cruiser.cjs",
      "--output-type",
      "err",
    ],
    { maxBuffer: 16 * 1024 * 1024 },
  ).catch((error: { stdout?: string; stderr?: string }) => ({
    stdout: error.stdout ?? "",
    stderr: error.stderr ?? "",
  }))
  expect(`${result.stdout}${result.stderr}`).toContain("no dependency violations found")
})
