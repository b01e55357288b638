/** Finding an attempt's program before it is spawned, with the error spawn itself would give. */
import { accessSync, constants as fs, statSync } from "node:fs"
import { delimiter, resolve } from "node:path"

/**
 * Why `program` cannot be run, as the error spawn gives (`ENOENT`, `EACCES`), or undefined: a path is
 * checked as is, a bare name is looked for on the attempt's `PATH`.
 */
export function programIssue(
  program: string,
  path: string,
  cwd = process.cwd(),
): NodeJS.ErrnoException | undefined {
  const fail = (code: string, what: string) =>
    Object.assign(new Error(`${code}: ${what}`), { code }) as NodeJS.ErrnoException
  // A NUL byte is refused by spawn itself, with its own error.
  if (program.includes("\0")) return undefined
  if (program === "") return fail("ENOENT", "the program name is empty")
  const candidates = program.includes("/")
    ? [resolve(cwd, program)]
    : path
        .split(delimiter)
        .filter(Boolean)
        .map((dir) => resolve(cwd, dir, program))
  let denied = false
  for (const file of candidates) {
    try {
      if (!statSync(file).isFile()) continue
      accessSync(file, fs.X_OK)
      return undefined
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EACCES") denied = true
    }
  }
  if (denied) return fail("EACCES", `${program} is not executable`)
  return fail("ENOENT", program.includes("/") ? `no such file ${program}` : `${program} not found on PATH`)
}
