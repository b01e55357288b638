/**
 * Commands that need no control plane: `profile list|use|set|delete`, `config validate` (offline, the
 * API's own schemas) and `dev` (runs the local control plane, `npm start`'s program, as a child process).
 */
import type { Command } from "commander"
import { Option } from "commander"
import { checkUrl, configPath, maskKey, readConfig, writeConfig } from "../config"
import type { Ctx } from "../context"
import { CliError, ExitCode, UsageError } from "../errors"
import { formatIssue, type Kind, Kinds, parseSpec, readSpecText } from "../files"
import { common, examples, jsonOption, note, out, outputOption, show } from "../kit"
import { runLocalPlane } from "../local-plane"
import { table } from "../output"

export function setupCommands(program: Command, ctx: Ctx): void {
  examples(
    program
      .command("dev")
      .description("run the local control plane (the same as npm start); Ctrl-C stops it"),
    ["swarmplane dev", "SWARMPLANE_PORT=9000 SWARMPLANE_DATA_DIR=/tmp/sp swarmplane dev"],
  ).action(async () => {
    // It runs until a signal; the CLI ends with the plane's exit code.
    ctx.exitCode = await runLocalPlane(ctx.env)
  })

  const profile = program.command("profile").description(`control planes and keys (${configPath(ctx.env)})`)
  examples(
    profile
      .command("list")
      .alias("ls")
      .description("list profiles; * marks the current one")
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane profile list"],
  ).action(async (_o: unknown, cmd: Command) => {
    const { format } = common(cmd)
    const config = await readConfig(ctx.env)
    const rows = Object.entries(config.profiles).map(([name, p]) => ({
      name,
      current: name === config.currentProfile,
      api: p.api,
      key: maskKey(p.key),
    }))
    show(ctx, format, rows, () =>
      rows.length
        ? table(
            ctx.out,
            ["current", "name", "api", "key"],
            rows.map((r) => [r.current ? "*" : " ", r.name, r.api, r.key]),
          )
        : "no profiles: swarmplane dev writes the profile local; add others with swarmplane profile set NAME --api URL --key KEY",
    )
  })

  examples(
    profile.command("use").description("make a profile the current one").argument("<name>", "profile name"),
    ["swarmplane profile use prod"],
  ).action(async (name: string) => {
    const config = await readConfig(ctx.env)
    if (!config.profiles[name])
      throw new CliError(
        `profile "${name}" not found`,
        ExitCode.notFound,
        "list them with: swarmplane profile list",
      )
    await writeConfig(ctx.env, { ...config, currentProfile: name })
    out(ctx, `using profile "${name}" (${config.profiles[name]?.api})`)
  })

  examples(
    profile
      .command("set")
      .description("add or change a profile (the first one becomes current)")
      .argument("<name>", "profile name")
      .option("--api <url>", "the control plane's base URL")
      .option("--key <key>", "API key; - reads it from stdin (keeps it out of shell history)")
      .option("--use", "make it the current profile"),
    [
      "swarmplane profile set prod --api https://abc.lambda-url.us-east-1.on.aws --key sp_...",
      "pass show swarmplane/prod | swarmplane profile set prod --api https://api.example.com --key -",
    ],
  ).action(async (name: string, o: { api?: string; key?: string; use?: boolean }, cmd: Command) => {
    // `--api` is also the global option, which commander gives the value to.
    const given = o.api ?? cmd.optsWithGlobals<{ api?: string }>().api
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(name))
      throw new UsageError(`profile name "${name}" is not valid`, "use letters, digits, '.', '_' and '-'")
    const config = await readConfig(ctx.env)
    const existing = config.profiles[name]
    const api = given ?? existing?.api
    let key = o.key === "-" ? (await ctx.io.readStdin()).trim() : (o.key ?? existing?.key)
    if (!api || !key)
      throw new UsageError(
        `profile "${name}" needs ${api ? "" : "--api URL"}${!api && !key ? " and " : ""}${key ? "" : "--key KEY"}`,
      )
    checkUrl(api)
    key = key.trim()
    const currentProfile = o.use || !config.currentProfile ? name : config.currentProfile
    const file = await writeConfig(ctx.env, {
      currentProfile,
      profiles: { ...config.profiles, [name]: { api, key } },
    })
    out(
      ctx,
      `profile "${name}" ${existing ? "updated" : "added"} in ${file}${currentProfile === name ? " (current)" : ""}`,
    )
  })

  examples(
    profile.command("delete").alias("rm").description("remove a profile").argument("<name>", "profile name"),
    ["swarmplane profile delete old"],
  ).action(async (name: string) => {
    const config = await readConfig(ctx.env)
    if (!config.profiles[name])
      throw new CliError(
        `profile "${name}" not found`,
        ExitCode.notFound,
        "list them with: swarmplane profile list",
      )
    const { [name]: _removed, ...profiles } = config.profiles
    const currentProfile = config.currentProfile === name ? Object.keys(profiles)[0] : config.currentProfile
    await writeConfig(ctx.env, { ...(currentProfile ? { currentProfile } : {}), profiles })
    out(
      ctx,
      `profile "${name}" removed${currentProfile !== config.currentProfile ? `; current profile: ${currentProfile ?? "none"}` : ""}`,
    )
  })

  const config = program.command("config").description("spec files")
  examples(
    config
      .command("validate")
      .description("check a swarm, job or backend file offline, with the API's own rules; prints every error")
      .requiredOption("-f, --file <file>", "the file, YAML or JSON (- reads stdin)")
      .addOption(
        new Option("--kind <kind>", "what the file is (detected from its fields when absent)").choices(Kinds),
      )
      .addOption(outputOption())
      .addOption(jsonOption()),
    [
      "swarmplane config validate -f swarm.yaml",
      "swarmplane config validate -f domyn-config.yaml --kind swarm",
    ],
  ).action(async (o: { file: string; kind?: Kind }, cmd: Command) => {
    const { format } = common(cmd)
    const shown = o.file === "-" ? "<stdin>" : o.file
    const spec = parseSpec(await readSpecText(o.file, ctx.io.readStdin), shown, o.kind)
    const ok = spec.errors.length === 0
    if (format !== "table") {
      const located = (issues: typeof spec.errors) =>
        issues.map((i) => ({ path: i.path.join("."), message: i.message, line: i.line, col: i.col }))
      show(
        ctx,
        format,
        {
          ok,
          kind: spec.kind,
          name: spec.name,
          errors: located(spec.errors),
          warnings: located(spec.warnings),
          body: spec.body,
        },
        () => "",
      )
    } else {
      for (const issue of [...spec.warnings, ...spec.errors]) note(ctx, formatIssue(shown, issue))
      if (ok) out(ctx, `ok: ${spec.kind} "${spec.name ?? "(unnamed)"}"`)
    }
    if (!ok)
      throw new CliError(
        `${shown} is not a valid ${spec.kind ?? "spec"} file: ${spec.errors.length} error${spec.errors.length > 1 ? "s" : ""}${format === "table" ? " (above)" : ""}`,
        ExitCode.invalid,
      )
  })
}
