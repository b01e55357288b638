import { readFileSync } from "node:fs"
import { join } from "node:path"
import { expect, test } from "vitest"
import { renderConfigReference } from "./reference"

test("docs/configuration.md matches the schemas (run `npm run docs` after changing a schema)", () => {
  const committed = readFileSync(join(import.meta.dirname, "../../../../docs/configuration.md"), "utf8")
  expect(committed).toBe(renderConfigReference())
})

test("the reference shows nested fields, defaults and descriptions", () => {
  const text = renderConfigReference()
  expect(text).toContain("| `container.launcher` |")
  expect(text).toContain("| `scaleGroups[].provider` |")
  expect(text).toMatch(/\| `port` \| integer \| `22` \| 1\.\.65535 \| SSH port of the login node\. \|/)
})
