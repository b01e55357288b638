/** `npm run docs`: writes docs/configuration.md from the model's schemas. */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { renderConfigReference } from "@swarmplane/core/model/reference"

const file = join(import.meta.dirname, "..", "docs", "configuration.md")
writeFileSync(file, renderConfigReference())
console.log(`wrote ${file}`)
