/**
 * Where a run's parts, progress and results go: the adapters of the `OutputStore` port (output-port.ts),
 * `LocalOutput(dir)` here and `S3Output` in s3-output.ts, and `openOutput`, which picks one from
 * `--output` (a folder, or `s3://bucket/prefix`).
 */
import { mkdir, open, readdir, readFile, rename, rm } from "node:fs/promises"
import { dirname, join } from "node:path"
import { UsageError } from "../cli"
import { binaryOrder, type OutputStore } from "./output-port"
import { parseS3Prefix } from "./s3"
import { S3Output } from "./s3-output"

/** The store for `--output`; an `s3://` URL without a bucket is a `UsageError`. */
export async function openOutput(location: string, env: NodeJS.ProcessEnv): Promise<OutputStore> {
  if (!location.startsWith("s3://")) return LocalOutput(location)
  const s3 = parseS3Prefix(location)
  if (!s3) throw new UsageError(`--output: "${location}" is not an s3://bucket/prefix URL`)
  return S3Output({ ...s3, location, env })
}

/** A local folder, created as needed; every write is `writeFileAtomic`. */
export function LocalOutput(root: string): OutputStore {
  return {
    location: root,
    list: async (dir) => {
      const entries = await readdir(join(root, dir), { withFileTypes: true }).catch(
        (error: NodeJS.ErrnoException) => {
          if (error.code === "ENOENT") return []
          throw error
        },
      )
      return entries
        .filter((e) => e.isFile())
        .map((e) => e.name)
        .sort(binaryOrder)
    },
    read: (name) =>
      readFile(join(root, name), "utf8").catch((error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT") return undefined
        throw error
      }),
    write: async (name, text) => {
      const path = join(root, name)
      await mkdir(dirname(path), { recursive: true })
      await writeFileAtomic(path, text)
    },
    where: (name) => join(root, name),
    close: () => {},
  }
}

/**
 * Write a file whole: to `<path>.<pid>.tmp`, fsync, rename over `path`, fsync the directory. A reader
 * sees the old file or the new one, never a part of one, and the rename survives a crash.
 */
export async function writeFileAtomic(path: string, text: string): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`
  const file = await open(tmp, "w")
  try {
    await file.writeFile(text)
    await file.sync()
  } catch (error) {
    await file.close().catch(() => {})
    await rm(tmp, { force: true })
    throw error
  }
  await file.close()
  await rename(tmp, path)
  await syncDir(dirname(path))
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, "r").catch(() => undefined)
  // Some file systems refuse fsync on a directory; the rename is then as durable as they make it.
  await handle?.sync().catch(() => {})
  await handle?.close()
}
