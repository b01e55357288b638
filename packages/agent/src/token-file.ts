/**
 * `--token-file`: the agent's API token from a file only its user may read, or from stdin (`-`, how
 * the local control plane hands it over). Either way it is in neither the agent's command line nor
 * its environment, where a process of the same user could read it in /proc.
 */
import { readFile, stat } from "node:fs/promises"
import { UsageError } from "./cli"

export async function readToken(
  file: string,
  stdin: AsyncIterable<Buffer | string> = process.stdin,
): Promise<string> {
  let text: string
  if (file === "-") {
    text = ""
    for await (const chunk of stdin) text += chunk.toString()
  } else {
    const info = await stat(file).catch((error: NodeJS.ErrnoException) => {
      throw new UsageError(`--token-file: cannot read ${file} (${error.code ?? error.message})`)
    })
    if (!info.isFile()) throw new UsageError(`--token-file: ${file} is not a file`)
    if ((info.mode & 0o077) !== 0)
      throw new UsageError(
        `--token-file: ${file} may be read by other users (mode ${(info.mode & 0o777).toString(8)}); chmod 600 ${file}`,
      )
    text = await readFile(file, "utf8")
  }
  const token = text.split("\n")[0]?.trim() ?? ""
  if (!token)
    throw new UsageError(
      `--token-file: ${file === "-" ? "stdin" : file} holds no token; put the API token on its first line`,
    )
  return token
}
