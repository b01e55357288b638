/**
 * Access commands: `whoami`, `key create|list|revoke` (also `keys`), `project create`. Keys are printed
 * once, never stored here.
 */
import type { Command } from "commander"
import { Option } from "commander"
import type { CreatedKey, Role } from "../client"
import type { Ctx } from "../context"
import { client, common, examples, integer, jsonOption, note, out, outputOption, show } from "../kit"
import { age, block, table } from "../output"

const Roles: Role[] = ["read", "write", "admin", "worker"]

export function accessCommands(program: Command, ctx: Ctx): void {
  examples(
    program
      .command("whoami")
      .description("the control plane, profile, project and role in use")
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane whoami", "swarmplane whoami --profile prod"],
  ).action(async (_o: unknown, cmd: Command) => {
    const { format } = common(cmd)
    const api = await client(ctx, cmd)
    const me = await api.me()
    const connection = ctx.lastConnection
    show(ctx, format, me, () =>
      block(ctx.out, [
        ["API", connection?.api],
        ["Profile", connection?.profile ?? (connection?.keyFromEnv ? "(SWARMPLANE_KEY)" : undefined)],
        ["Project", me.project],
        ["Role", `${me.role}${me.operator ? " (operator: may create projects)" : ""}`],
        ["Key id", me.keyId],
      ]),
    )
  })

  const key = program.command("key").alias("keys").description("API keys of a project")
  examples(
    key
      .command("create")
      .description("create an API key (admin key); it is shown once")
      .addOption(
        new Option("--role <role>", "what the key may do (worker: only what a worker agent needs)")
          .choices(Roles)
          .makeOptionMandatory(),
      )
      .option("--name <name>", "what the key is for, e.g. ci")
      .option("--project <project>", "project of the key (default: your key's)")
      .addOption(
        new Option("--expires-in-days <days>", "the key stops working after this many days (1-3650)")
          .argParser(integer(1, 3650))
          .conflicts("expiresAt"),
      )
      .option("--expires-at <time>", "the key stops working at this ISO-8601 time, e.g. 2027-01-31T00:00:00Z")
      .addOption(outputOption())
      .addOption(jsonOption()),
    [
      "swarmplane key create --role read --name dashboard",
      "CI_KEY=$(swarmplane key create --role write --name ci --expires-in-days 90)",
      "swarmplane key create --role worker --name agents   # for swarmplane-agent (SWARMPLANE_TOKEN)",
    ],
  ).action(
    async (
      o: { role: Role; name?: string; project?: string; expiresInDays?: number; expiresAt?: string },
      cmd: Command,
    ) => {
      const { format } = common(cmd)
      const api = await client(ctx, cmd)
      const project = o.project ?? (await api.me()).project
      const created = await api.createKey(project, {
        role: o.role,
        ...(o.name ? { name: o.name } : {}),
        ...(o.expiresInDays !== undefined ? { expiresInDays: o.expiresInDays } : {}),
        ...(o.expiresAt ? { expiresAt: o.expiresAt } : {}),
      })
      printKey(ctx, format, created, created, `${created.role} key of project "${created.project}"`)
    },
  )

  examples(
    key
      .command("list")
      .alias("ls")
      .description("list a project's keys (never their secrets), revoked ones too")
      .option("--project <project>", "project (default: your key's)")
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane key list"],
  ).action(async (o: { project?: string }, cmd: Command) => {
    const { format } = common(cmd)
    const api = await client(ctx, cmd)
    const project = o.project ?? (await api.me()).project
    const keys = await api.listKeys(project)
    show(ctx, format, keys, () =>
      table(
        ctx.out,
        ["id", "name", "role", "prefix", "age", "expires", "revoked"],
        keys.map((k) => [k.id, k.name, k.role, k.prefix, age(k.createdAt), k.expiresAt, k.revokedAt]),
      ),
    )
  })

  examples(
    key
      .command("revoke")
      .description("revoke an API key (admin key): it stops working at once and stays listed as revoked")
      .argument("<id>", "the key's id (swarmplane key list), not its secret")
      .option("--project <project>", "project of the key (default: your key's)")
      .option("--self", "allow revoking the key this command runs with")
      .addOption(outputOption())
      .addOption(jsonOption()),
    [
      "swarmplane key revoke key-01kb2x9q3v0000d4m8n0",
      "swarmplane key revoke key-01kb2x9q3v0000d4m8n0 -o json",
    ],
  ).action(async (id: string, o: { project?: string; self?: boolean }, cmd: Command) => {
    const { format } = common(cmd)
    const api = await client(ctx, cmd)
    const project = o.project ?? (await api.me()).project
    const revoked = await api.revokeKey(project, id, { self: o.self === true })
    show(
      ctx,
      format,
      revoked,
      () => `revoked key ${revoked.id} of project "${revoked.project}" at ${revoked.revokedAt}`,
    )
  })

  const project = program.command("project").description("projects (tenants)")
  examples(
    project
      .command("create")
      .description("create a project (operator admin key); prints its first admin key, once")
      .argument("<name>", "project name, a DNS label such as ml-research")
      .option("--display-name <text>", "human-friendly name")
      .addOption(outputOption())
      .addOption(jsonOption()),
    [
      "swarmplane project create team-b",
      "swarmplane project create team-b | swarmplane profile set team-b --api http://127.0.0.1:8787 --key -",
    ],
  ).action(async (name: string, o: { displayName?: string }, cmd: Command) => {
    const { format } = common(cmd)
    const api = await client(ctx, cmd)
    const created = await api.createProject({
      name,
      ...(o.displayName ? { displayName: o.displayName } : {}),
    })
    printKey(ctx, format, created, created.adminKey, `admin key of the new project "${created.project.name}"`)
    if (format === "table")
      note(
        ctx,
        ctx.err.dim(
          `use it with: swarmplane profile set ${name} --api ${ctx.lastConnection?.api ?? "URL"} --key KEY`,
        ),
      )
  })
}

/** A new key: alone on stdout when piped (for `$(...)`), with its details on a terminal; always a warning. */
function printKey(
  ctx: Ctx,
  format: ReturnType<typeof common>["format"],
  value: unknown,
  key: CreatedKey,
  what: string,
) {
  if (format !== "table") show(ctx, format, value, () => "")
  else if (!ctx.io.stdout.isTTY) out(ctx, key.key)
  else
    out(
      ctx,
      block(ctx.out, [
        ["Key", ctx.out.bold(key.key)],
        ["Id", key.id],
        ["Project", key.project],
        ["Role", key.role],
        ["Name", key.name],
      ]),
    )
  note(
    ctx,
    ctx.err.yellow(
      `warning: this is the ${what}; it is shown only now: store it safely (swarmplane cannot show it again)`,
    ),
  )
}
