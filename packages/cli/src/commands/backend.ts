/** Backend and worker commands: `backend add|list|status`, `worker list`. */
import type { Command } from "commander"
import type { BackendBody, BackendStatus, Failed, Worker } from "../client"
import type { Ctx } from "../context"
import { client, common, examples, jsonOption, note, out, outputOption, readSpec, show } from "../kit"
import { age, block, detailText, type Paint, state, table } from "../output"

export function backendCommands(program: Command, ctx: Ctx): void {
  const backend = program.command("backend").description("register and inspect backends (clusters)")

  examples(
    backend
      .command("add")
      .description(
        "register a backend, or replace its config (admin key); `{id, config}` or id + config fields",
      )
      .requiredOption("-f, --file <file>", "backend file, YAML or JSON (- reads stdin)")
      .addOption(outputOption())
      .addOption(jsonOption()),
    [
      "swarmplane backend add -f slurm-a.yaml",
      "swarmplane config validate -f slurm-a.yaml && swarmplane backend add -f slurm-a.yaml",
    ],
  ).action(async (o: { file: string }, cmd: Command) => {
    const { format } = common(cmd)
    const spec = await readSpec(ctx, o.file, "backend", "swarmplane backend add")
    const { backend: saved, created } = await (await client(ctx, cmd)).putBackend(spec.body as BackendBody)
    if (format !== "table") return show(ctx, format, saved, () => "")
    if (!ctx.io.stdout.isTTY) return out(ctx, saved.id)
    out(
      ctx,
      `backend "${saved.id}" ${created ? "registered" : "updated"} (${saved.config.type}, ${saved.kind})`,
    )
    note(ctx, ctx.err.dim(`see it with: swarmplane backend status ${saved.id}`))
  })

  examples(
    backend
      .command("list")
      .alias("ls")
      .description("list the project's backends")
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane backend list"],
  ).action(async (_o: unknown, cmd: Command) => {
    const { format } = common(cmd)
    const items = await (await client(ctx, cmd)).listBackends()
    show(ctx, format, items, () =>
      items.length
        ? table(
            ctx.out,
            ["id", "type", "kind", "healthy", "message", "checked"],
            items.map((b) => [
              b.id,
              b.config.type,
              b.kind,
              b.status.healthy === undefined ? "-" : state(ctx.out, String(b.status.healthy)),
              b.status.message,
              b.status.checkedAt ? `${age(b.status.checkedAt)} ago` : "never",
            ]),
          )
        : "no backends: register one with swarmplane backend add -f backend.yaml",
    )
  })

  examples(
    backend
      .command("status")
      .description("a backend now: descriptor, health, capacity, workers and the autoscaler's decisions")
      .argument("<id>", "backend id")
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane backend status local", "swarmplane backend status local -o json"],
  ).action(async (id: string, _o: unknown, cmd: Command) => {
    const { format } = common(cmd)
    const api = await client(ctx, cmd)
    const status = await api.backendStatus(id)
    if (format !== "table") return show(ctx, format, status, () => "")
    const workers = status.descriptor.kind === "worker-daemon" ? await api.listWorkers(id) : []
    out(ctx, renderStatus(ctx.out, status, workers))
  })

  const worker = program.command("worker").description("the worker agents of `workers` backends")
  examples(
    worker
      .command("list")
      .alias("ls")
      .description("list workers")
      .option("--backend <id>", "only the workers of this backend")
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane worker list", "swarmplane worker list --backend local -o json"],
  ).action(async (o: { backend?: string }, cmd: Command) => {
    const { format } = common(cmd)
    const items = await (await client(ctx, cmd)).listWorkers(o.backend)
    show(ctx, format, items, () => (items.length ? workerTable(ctx.out, items) : "no workers"))
  })
}

const failed = (value: object): value is Failed => "error" in value

export function renderStatus(p: Paint, s: BackendStatus, workers: Worker[]): string {
  const d = s.descriptor
  const attributes = Object.entries(d.advertisedAttributes)
    .map(([k, v]) => `${k}=${v.join("|")}`)
    .join(" ")
  const capacity = failed(s.capacity)
    ? p.red(`unavailable: ${s.capacity.error}`)
    : `cpu ${s.capacity.free.cpu}/${s.capacity.total.cpu} free, memory ${s.capacity.free.memoryMiB}/${s.capacity.total.memoryMiB} MiB free, gpu ${s.capacity.free.gpu}/${s.capacity.total.gpu} free`
  const live = failed(s.status)
    ? p.red(`unavailable: ${s.status.error}`)
    : `${state(p, s.status.healthy ? "healthy" : "dead")}${s.status.message ? ` - ${s.status.message}` : ""}`
  const last = s.lastTick
  let text = block(p, [
    ["Backend", `${s.id} (${d.kind})${d.displayName && d.displayName !== s.id ? ` "${d.displayName}"` : ""}`],
    ["Health", live],
    [
      "Last tick",
      last.checkedAt
        ? `${last.healthy === false ? p.red("failed") : "ok"} ${age(last.checkedAt)} ago${last.message ? ` - ${last.message}` : ""}`
        : "never",
    ],
    ["Capacity", capacity],
    ["Attributes", attributes],
    ["Scale groups", d.scaleGroups.join(", ")],
  ])
  if (d.kind === "worker-daemon") {
    text += `\n${p.bold("Workers:")}\n${workers.length ? workerTable(p, workers) : "(none)\n"}`
    text += `\n${p.bold("Autoscaler:")}\n`
    if (failed(s.autoscaler)) text += `${p.red(`unavailable: ${s.autoscaler.error}`)}\n`
    else if (!s.autoscaler.groups.length) text += "(no decisions yet)\n"
    else
      text += table(
        p,
        ["group", "min", "max", "current", "starting", "demand", "target", "action", "reason"],
        s.autoscaler.groups.map((g) => [
          g.group,
          g.min,
          g.max,
          g.current,
          g.starting,
          g.demand,
          g.target,
          state(p, g.action),
          `${g.reason}${g.backoffUntil ? ` (backing off until ${g.backoffUntil})` : ""}`,
        ]),
      )
  } else if (!failed(s.status) && Object.keys(s.status.detail).length)
    text += `\n${p.bold("Cluster:")}\n${detailText(p, s.status.detail)}`
  return text
}

function workerTable(p: Paint, workers: Worker[]): string {
  return table(
    p,
    ["id", "backend", "group", "health", "cpu", "memory", "gpu", "address", "isolation", "last seen", "idle"],
    workers.map((w) => [
      w.id,
      w.backendId,
      w.scaleGroup,
      state(p, w.health),
      w.resources.cpu,
      `${w.resources.memoryMiB} MiB`,
      w.resources.gpu ? `${w.resources.gpu}${w.resources.gpuType ? ` ${w.resources.gpuType}` : ""}` : 0,
      w.address,
      // What the worker's agent said its tasks run in (`namespaces` or `none`); older agents say nothing.
      w.attributes.isolation ?? "-",
      `${age(w.lastSeen)} ago`,
      w.idleSince ? age(w.idleSince) : "-",
    ]),
  )
}
