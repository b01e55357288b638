import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { UsageError } from "./cli"
import { readToken } from "./token-file"

const dir = mkdtempSync(join(tmpdir(), "sp-token-"))

async function* lines(...chunks: string[]) {
  for (const c of chunks) yield Buffer.from(c)
}

describe("--token-file", () => {
  it("reads the first line of a file only its user may read, or of stdin", async () => {
    const file = join(dir, "ok")
    writeFileSync(file, "sk-from-file\n", { mode: 0o600 })
    expect(await readToken(file)).toBe("sk-from-file")
    expect(await readToken("-", lines("sk-from-", "stdin\n", "ignored\n"))).toBe("sk-from-stdin")
  })

  const refused: Record<string, { setup: () => string; says: RegExp }> = {
    "a file others may read": {
      setup: () => {
        const file = join(dir, "open")
        writeFileSync(file, "sk-open\n", { mode: 0o644 })
        return file
      },
      says: /^--token-file: .*open may be read by other users \(mode 644\); chmod 600 .*open$/,
    },
    "a missing file": {
      setup: () => join(dir, "missing"),
      says: /^--token-file: cannot read .*missing \(ENOENT\)$/,
    },
    "an empty file": {
      setup: () => {
        const file = join(dir, "empty")
        writeFileSync(file, "\n", { mode: 0o600 })
        return file
      },
      says: /holds no token; put the API token on its first line$/,
    },
  }
  for (const [name, tc] of Object.entries(refused))
    it(`refuses ${name}, saying how to fix it`, async () => {
      const error = await readToken(tc.setup()).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(UsageError)
      expect((error as Error).message).toMatch(tc.says)
    })
})
