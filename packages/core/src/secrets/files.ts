/**
 * Secrets as files (the local control plane): `<folder>/<project>/<name>`. Scoped by project, so a
 * backend config of one project can never read another project's secret; the folder holds nothing
 * else (the API pepper lives outside it).
 */
import { readFile } from "node:fs/promises"
import { join } from "node:path"
import { VisibleError } from "../util/errors"
import type { Secrets } from "./port"

const safePart = /^[A-Za-z0-9][A-Za-z0-9._-]*$/

export function FileSecrets(folder: string): Secrets {
  return {
    async get(project, name) {
      // Names are flattened ('/' → '__') so a name can never leave its project's folder.
      const file = name.replaceAll("/", "__")
      if (!safePart.test(project) || !safePart.test(file))
        throw new VisibleError("secret.invalid_name", `secret name "${name}" is not valid`)
      const path = join(folder, project, file)
      try {
        return (await readFile(path, "utf8")).trimEnd()
      } catch {
        throw new VisibleError("secret.not_found", `secret "${name}" not found: put it in ${path}`, 400, {
          name,
        })
      }
    },
  }
}
