/** Profiles through the commands: set (key from a flag or stdin), list, use, delete, and the file they write. */
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { expect, test } from "vitest"
import { run } from "../testing"

test("profile set, list, use and delete", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sp-profiles-"))
  const env = { SWARMPLANE_CONFIG_DIR: dir, SWARMPLANE_API: "", SWARMPLANE_KEY: "" }
  const set = await run(
    ["profile", "set", "prod", "--api", "https://api.example.com", "--key", "sp_prod_0123456789"],
    { env },
  )
  expect(set.code, set.stderr).toBe(0)
  expect(set.stdout).toContain('profile "prod" added')
  const piped = await run(["profile", "set", "lab", "--api", "http://10.0.0.2:8787", "--key", "-"], {
    env,
    stdin: "sp_lab_0123456789\n",
  })
  expect(piped.code, piped.stderr).toBe(0)
  expect(JSON.parse(readFileSync(join(dir, "config.json"), "utf8"))).toEqual({
    currentProfile: "prod",
    profiles: {
      prod: { api: "https://api.example.com", key: "sp_prod_0123456789" },
      lab: { api: "http://10.0.0.2:8787", key: "sp_lab_0123456789" },
    },
  })
  expect((await run(["profile", "list"], { env })).stdout).toBe(
    [
      "CURRENT   NAME   API                       KEY",
      "*         prod   https://api.example.com   sp_prod…6789",
      "          lab    http://10.0.0.2:8787      sp_lab_…6789",
      "",
    ].join("\n"),
  )
  expect((await run(["profile", "use", "lab"], { env })).code).toBe(0)
  expect(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")).currentProfile).toBe("lab")
  expect((await run(["profile", "use", "nope"], { env })).code).toBe(3)
  expect((await run(["profile", "delete", "lab"], { env })).stdout).toContain("current profile: prod")
  const missing = await run(["profile", "set", "new"], { env })
  expect([missing.code, missing.stderr]).toEqual([
    2,
    'swarmplane: profile "new" needs --api URL and --key KEY\n',
  ])
})

test("a command uses the current profile's API and key", async () => {
  const dir = mkdtempSync(join(tmpdir(), "sp-profiles-"))
  const env = { SWARMPLANE_CONFIG_DIR: dir, SWARMPLANE_API: "", SWARMPLANE_KEY: "" }
  await run(["profile", "set", "lab", "--api", "http://lab.test", "--key", "sp_lab_key"], { env })
  const res = await run(["swarm", "list"], {
    env,
    routes: { "GET /v1/swarms": () => ({ body: { items: [] } }) },
  })
  expect(res.code, res.stderr).toBe(0)
  expect(res.requests[0]?.headers.get("authorization")).toBe("Bearer sp_lab_key")
  const unauthorised = await run(["swarm", "list"], {
    env,
    routes: {
      "GET /v1/swarms": () => ({
        status: 401,
        body: { error: { code: "auth.unauthorized", message: "no" } },
      }),
    },
  })
  expect(unauthorised.code).toBe(4)
  expect(unauthorised.stderr).toContain('check the key of profile "lab"')
})
