/**
 * Profiles: named control planes with their keys, in `$SWARMPLANE_CONFIG_DIR/config.json` (default
 * `$XDG_CONFIG_HOME/swarmplane`, else `~/.config/swarmplane`), as
 * `{ currentProfile, profiles: { name: { api, key } } }`. The local control plane writes the profile
 * `local` there, so a fresh `swarmplane dev` / `npm start` needs no setup.
 *
 * Which control plane a command talks to: `--api` > `--profile` > `SWARMPLANE_API` > the current
 * profile. Which key: `SWARMPLANE_KEY` > the profile's key, and a profile's key is only ever sent to
 * that profile's own API, never to a URL given by `--api` or `SWARMPLANE_API`.
 */
import { chmod, mkdir, readFile, rename, writeFile } from "node:fs/promises"
import { homedir } from "node:os"
import { join } from "node:path"
import { CliError, ExitCode } from "./errors"
import { isRecord } from "./http"

export type Env = Record<string, string | undefined>

export interface Profile {
  api: string
  key: string
}

export interface ConfigFile {
  currentProfile?: string
  profiles: Record<string, Profile>
}

/** Where the control plane is and how the command authenticates, and where that came from. */
export interface Connection {
  api: string
  key?: string
  /** The profile used, if any. */
  profile?: string
  /** The key came from SWARMPLANE_KEY. */
  keyFromEnv: boolean
}

export function configDir(env: Env): string {
  if (env.SWARMPLANE_CONFIG_DIR) return env.SWARMPLANE_CONFIG_DIR
  return join(env.XDG_CONFIG_HOME || join(homedir(), ".config"), "swarmplane")
}

export function configPath(env: Env): string {
  return join(configDir(env), "config.json")
}

/** The config file; an empty one when it does not exist yet. */
export async function readConfig(env: Env): Promise<ConfigFile> {
  const file = configPath(env)
  let text: string
  try {
    text = await readFile(file, "utf8")
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { profiles: {} }
    throw new CliError(`cannot read ${file}: ${(error as Error).message}`)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new CliError(
      `${file} is not valid JSON (${(error as Error).message})`,
      ExitCode.error,
      "fix it, or remove it and run swarmplane profile set NAME --api URL --key KEY",
    )
  }
  return parseConfig(json, file)
}

/** Check the shape; unknown fields are kept out, broken profiles named. */
export function parseConfig(json: unknown, file = "config.json"): ConfigFile {
  const broken = (what: string) =>
    new CliError(
      `${file}: ${what}`,
      ExitCode.error,
      "fix the file, or set the profile again with swarmplane profile set",
    )
  if (!isRecord(json)) throw broken('must be an object such as { "profiles": {} }')
  const profiles: Record<string, Profile> = {}
  const raw = json.profiles ?? {}
  if (!isRecord(raw)) throw broken("profiles must be an object of { api, key }")
  for (const [name, value] of Object.entries(raw)) {
    if (!isRecord(value) || typeof value.api !== "string" || typeof value.key !== "string")
      throw broken(`profile "${name}" must have string fields api and key`)
    profiles[name] = { api: value.api, key: value.key }
  }
  const current = typeof json.currentProfile === "string" ? json.currentProfile : undefined
  return { ...(current ? { currentProfile: current } : {}), profiles }
}

/** Write the file (0600, folder 0700), replacing it atomically. Other fields in it are kept. */
export async function writeConfig(env: Env, config: ConfigFile): Promise<string> {
  const dir = configDir(env)
  const file = configPath(env)
  await mkdir(dir, { recursive: true, mode: 0o700 })
  let existing: Record<string, unknown> = {}
  try {
    const parsed: unknown = JSON.parse(await readFile(file, "utf8"))
    if (isRecord(parsed)) existing = parsed
  } catch {}
  const next = { ...existing, currentProfile: config.currentProfile, profiles: config.profiles }
  const temp = `${file}.${process.pid}.tmp`
  await writeFile(temp, `${JSON.stringify(next, null, 2)}\n`, { mode: 0o600 })
  await chmod(temp, 0o600)
  await rename(temp, file)
  return file
}

export interface ConnectionFlags {
  profile?: string
  api?: string
}

/** Pick the API and key for a command (see the module comment for the order). */
export function resolveConnection(config: ConfigFile, env: Env, flags: ConnectionFlags): Connection {
  const named = flags.profile ?? (env.SWARMPLANE_PROFILE || undefined)
  if (named !== undefined && !config.profiles[named])
    throw new CliError(
      `profile "${named}" not found in ${configPath(env)}`,
      ExitCode.notFound,
      profileHint(config),
    )
  const profileName = named ?? config.currentProfile
  const profile = profileName ? config.profiles[profileName] : undefined
  const api =
    flags.api ?? (flags.profile ? profile?.api : ((env.SWARMPLANE_API || undefined) ?? profile?.api))
  if (!api)
    throw new CliError(
      "no control plane configured",
      ExitCode.error,
      "start a local one with swarmplane dev (it writes the profile local), or add one with swarmplane profile set NAME --api URL --key KEY, or set SWARMPLANE_API and SWARMPLANE_KEY",
    )
  checkUrl(api)
  const envKey = env.SWARMPLANE_KEY || undefined
  const usesProfile = profile !== undefined && sameApi(profile.api, api)
  const key = envKey ?? (usesProfile ? profile.key : undefined)
  return {
    api,
    ...(key ? { key } : {}),
    ...(usesProfile ? { profile: profileName } : {}),
    keyFromEnv: envKey !== undefined,
  }
}

function profileHint(config: ConfigFile): string {
  const names = Object.keys(config.profiles)
  return names.length
    ? `the profiles are ${names.join(", ")} (swarmplane profile list)`
    : "there are no profiles yet: add one with swarmplane profile set NAME --api URL --key KEY"
}

function sameApi(a: string, b: string): boolean {
  return a.replace(/\/+$/, "") === b.replace(/\/+$/, "")
}

/** An API URL must be http(s); plain http only makes sense to this machine, but that is the user's call. */
export function checkUrl(api: string): void {
  let url: URL
  try {
    url = new URL(api)
  } catch {
    throw new CliError(`"${api}" is not a URL`, ExitCode.usage, "give the API as http(s)://host[:port]")
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    throw new CliError(
      `"${api}" is not an http(s) URL`,
      ExitCode.usage,
      "give the API as https://host[:port]",
    )
}

/** A key shown in a listing: enough to recognise it, never enough to use it. */
export function maskKey(key: string): string {
  return key.length <= 10 ? "****" : `${key.slice(0, 7)}…${key.slice(-4)}`
}
