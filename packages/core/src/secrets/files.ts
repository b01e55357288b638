/** Secrets as files in a folder (the local control plane: `<data dir>/secrets/<name>`). */
import { readFile } from "node:fs/promises"
import { join } from "node:path"
import type { Secrets } from "../runtime"
import { VisibleError } from "../util/errors"

const safeName = /^[A-Za-z0-9][A-Za-z0-9._-]*$/

export function FileSecrets(folder: string): Secrets {
  return {
    async get(name) {
      // Names are flattened ('/' → '__') so a name can never leave the folder.
      const file = name.replaceAll("/", "__")
      if (!safeName.test(file))
        throw new VisibleError("secret.invalid_name", `secret name "${name}" is not valid`)
      try {
        return (await readFile(join(folder, file), "utf8")).trimEnd()
      } catch {
        throw new VisibleError(
          "secret.not_found",
          `secret "${name}" not found: put it in ${join(folder, file)}`,
          400,
          { name },
        )
      }
    },
  }
}
