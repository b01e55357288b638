/** Profiles: which API and key a command uses (flags, environment, the current profile), and the file. */
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, test } from "vitest"
import {
  type ConfigFile,
  configDir,
  maskKey,
  parseConfig,
  readConfig,
  resolveConnection,
  writeConfig,
} from "./config"
import { CliError, ExitCode } from "./errors"

const config: ConfigFile = {
  currentProfile: "local",
  profiles: {
    local: { api: "http://127.0.0.1:8787", key: "sp_local-key-000000" },
    prod: { api: "https://api.example.com", key: "sp_prod-key-0000000" },
  },
}

describe("which control plane and key a command uses", () => {
  const cases: Record<
    string,
    {
      env?: Record<string, string>
      flags?: { profile?: string; api?: string }
      want: Record<string, unknown>
      absent?: string[]
    }
  > = {
    "the current profile": {
      want: { api: "http://127.0.0.1:8787", key: "sp_local-key-000000", profile: "local", keyFromEnv: false },
    },
    "--profile picks another": {
      flags: { profile: "prod" },
      want: { api: "https://api.example.com", key: "sp_prod-key-0000000", profile: "prod" },
    },
    "SWARMPLANE_PROFILE picks another": {
      env: { SWARMPLANE_PROFILE: "prod" },
      want: { api: "https://api.example.com", profile: "prod" },
    },
    "SWARMPLANE_API and SWARMPLANE_KEY override the current profile": {
      env: { SWARMPLANE_API: "http://10.0.0.1:8787", SWARMPLANE_KEY: "sp_env" },
      want: { api: "http://10.0.0.1:8787", key: "sp_env", keyFromEnv: true },
    },
    "SWARMPLANE_KEY alone overrides the key": {
      env: { SWARMPLANE_KEY: "sp_env" },
      want: { api: "http://127.0.0.1:8787", key: "sp_env", keyFromEnv: true },
    },
    "--profile beats SWARMPLANE_API": {
      env: { SWARMPLANE_API: "http://10.0.0.1:8787" },
      flags: { profile: "prod" },
      want: { api: "https://api.example.com", key: "sp_prod-key-0000000" },
    },
    "--api beats everything": {
      env: { SWARMPLANE_API: "http://10.0.0.1:8787" },
      flags: { api: "http://127.0.0.1:8787/" },
      want: { api: "http://127.0.0.1:8787/", key: "sp_local-key-000000" },
    },
    "a profile's key is never sent to another API": {
      flags: { api: "https://elsewhere.example.com" },
      want: { api: "https://elsewhere.example.com" },
      absent: ["key", "profile"],
    },
    "nor to SWARMPLANE_API": {
      env: { SWARMPLANE_API: "https://elsewhere.example.com" },
      want: { api: "https://elsewhere.example.com" },
      absent: ["key"],
    },
  }
  for (const [name, tc] of Object.entries(cases))
    test(name, () => {
      const connection = resolveConnection(config, tc.env ?? {}, tc.flags ?? {})
      expect(connection).toMatchObject(tc.want)
      for (const field of tc.absent ?? []) expect(connection).not.toHaveProperty(field)
    })

  test("an unknown profile is not found (exit 3) and the profiles are listed", () => {
    const error = catchError(() => resolveConnection(config, {}, { profile: "staging" }))
    expect(error).toMatchObject({ exitCode: ExitCode.notFound, hint: expect.stringContaining("local, prod") })
  })

  test("no profile and no SWARMPLANE_API says how to get one", () => {
    const error = catchError(() => resolveConnection({ profiles: {} }, {}, {}))
    expect(error.message).toBe("no control plane configured")
    expect(error.hint).toContain("swarmplane dev")
  })

  test("an API that is not a URL is a usage error", () => {
    expect(catchError(() => resolveConnection(config, {}, { api: "localhost:8787" })).exitCode).toBe(
      ExitCode.usage,
    )
  })
})

describe("the config file", () => {
  test("where it is", () => {
    expect(configDir({ SWARMPLANE_CONFIG_DIR: "/c" })).toBe("/c")
    expect(configDir({ XDG_CONFIG_HOME: "/x" })).toBe("/x/swarmplane")
    expect(configDir({})).toMatch(/\.config\/swarmplane$/)
  })

  test("missing is empty; written 0600 and read back; other fields kept", async () => {
    const env = { SWARMPLANE_CONFIG_DIR: mkdtempSync(join(tmpdir(), "sp-cfg-")) }
    expect(await readConfig(env)).toEqual({ profiles: {} })
    writeFileSync(
      join(env.SWARMPLANE_CONFIG_DIR, "config.json"),
      JSON.stringify({ editor: "vi", profiles: {} }),
    )
    const file = await writeConfig(env, config)
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(await readConfig(env)).toEqual(config)
    expect(JSON.parse(readFileSync(file, "utf8")).editor).toBe("vi")
  })

  test("the local control plane's format is read as is", () => {
    const written = {
      profiles: { local: { api: "http://127.0.0.1:8787", key: "k" } },
      currentProfile: "local",
    }
    expect(parseConfig(written)).toEqual(written)
  })

  test("broken files say which profile is wrong", async () => {
    expect(catchError(() => parseConfig({ profiles: { a: { api: 1 } } })).message).toContain('profile "a"')
    const env = { SWARMPLANE_CONFIG_DIR: mkdtempSync(join(tmpdir(), "sp-cfg-")) }
    writeFileSync(join(env.SWARMPLANE_CONFIG_DIR, "config.json"), "{ nope")
    await expect(readConfig(env)).rejects.toThrow(/is not valid JSON/)
  })

  test("keys are masked in listings", () => {
    expect(maskKey("sp_abcdefghijklmnop1234")).toBe("sp_abcd…1234")
    expect(maskKey("short")).toBe("****")
  })
})

function catchError(fn: () => unknown): CliError {
  try {
    fn()
  } catch (error) {
    if (error instanceof CliError) return error
    throw error
  }
  throw new Error("expected an error")
}
