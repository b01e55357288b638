import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { expect, test } from "vitest"
import { FileSecrets } from "./files"

test("secrets are scoped by project and cannot leave their folder", async () => {
  const dir = mkdtempSync(join(tmpdir(), "secrets-"))
  mkdirSync(join(dir, "team-a"))
  writeFileSync(join(dir, "team-a", "hpc-key"), "PRIVATE\n")
  writeFileSync(join(dir, "pepper"), "outside")
  const secrets = FileSecrets(dir)
  expect(await secrets.get("team-a", "hpc-key")).toBe("PRIVATE")
  await expect(secrets.get("team-b", "hpc-key")).rejects.toMatchObject({ code: "secret.not_found" })
  await expect(secrets.get("team-a", "../pepper")).rejects.toMatchObject({ code: "secret.invalid_name" })
  await expect(secrets.get("..", "pepper")).rejects.toMatchObject({ code: "secret.invalid_name" })
})
