/** Swarm commands: `up`, `down`, `status`, `swarm list`, `swarm describe`, `swarm metrics`. */
import type { Command } from "commander"
import { allPages, type Event, isRecord, type Swarm, type SwarmBody, type SwarmMetrics } from "../client"
import type { Ctx } from "../context"
import { CliError, ExitCode, UsageError } from "../errors"
import {
  client,
  common,
  examples,
  integer,
  jsonOption,
  note,
  out,
  outputOption,
  readSpec,
  show,
} from "../kit"
import { age, block, table } from "../output"
import { eventTable, replicaTable, swarmPairs, swarmSummary, swarmTable } from "../views"
import { waitForSwarm } from "./swarm-wait"
import { checkUpBackend } from "./up-backend-check"

export function swarmCommands(program: Command, ctx: Ctx): void {
  examples(
    program
      .command("up")
      .description("create a swarm from a file, or update it (swarmplane and domyn-swarm formats)")
      .requiredOption("-f, --file <file>", "swarm file, YAML or JSON (- reads stdin)")
      .option("--name <name>", "swarm name, instead of the file's")
      .option("--backend <id>", "backend to run on, instead of the file's (or the only one of its type)")
      .option("--wait", "wait until the swarm is RUNNING, showing its progress")
      .option("--timeout <seconds>", "with --wait: give up after this long (exit 7)", integer(1), 600)
      .addOption(outputOption())
      .addOption(jsonOption()),
    [
      "swarmplane up -f swarm.yaml",
      "swarmplane up -f swarm.yaml --wait --timeout 900",
      "swarmplane up -f domyn-config.yaml --name llama --wait",
    ],
  ).action(
    async (
      o: { file: string; name?: string; backend?: string; wait?: boolean; timeout: number },
      cmd: Command,
    ) => {
      const { format } = common(cmd)
      const spec = await readSpec(ctx, o.file, "swarm", "swarmplane up")
      const body = {
        ...spec.body,
        ...(o.name ? { name: o.name } : {}),
        ...(o.backend ? { backendId: o.backend } : {}),
      }
      const api = await client(ctx, cmd)
      await checkUpBackend(ctx, api, spec, body)
      const { swarm, created } = await api.applySwarm(body as SwarmBody)
      let result = swarm
      if (o.wait)
        result = await waitForSwarm(ctx, api, swarm.name, {
          phase: "RUNNING",
          timeoutS: o.timeout,
          again: o.file === "-" ? `swarmplane status ${swarm.name}` : `swarmplane up -f ${o.file} --wait`,
        })
      if (format !== "table") return show(ctx, format, result, () => "")
      if (!ctx.io.stdout.isTTY) return out(ctx, result.name)
      const verb = created ? "created" : "applied"
      if (o.wait)
        out(
          ctx,
          `swarm "${result.name}" ${verb} and RUNNING: ${result.replicaStatus.ready}/${result.replicaStatus.total} replicas ready at ${result.url ?? "(no endpoint yet)"}`,
        )
      else {
        out(ctx, `swarm "${result.name}" ${verb} (${result.phase})`)
        note(
          ctx,
          ctx.err.dim(
            `watch it with: swarmplane status ${result.name}, or wait with: swarmplane up -f ${o.file} --wait`,
          ),
        )
      }
    },
  )

  examples(
    program
      .command("down")
      .description("delete a swarm: its replicas and endpoint stop, and it ends STOPPED")
      .argument("<name>", "swarm name")
      .option("-y, --yes", "do not ask for confirmation (needed when stdin is not a terminal)")
      .option("--wait", "wait until the swarm is STOPPED")
      .option("--timeout <seconds>", "with --wait: give up after this long (exit 7)", integer(1), 300)
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane down demo", "swarmplane down demo --yes --wait"],
  ).action(async (name: string, o: { yes?: boolean; wait?: boolean; timeout: number }, cmd: Command) => {
    const { format } = common(cmd)
    if (!o.yes) {
      if (!ctx.io.stdinIsTTY)
        throw new UsageError(
          `refusing to delete swarm "${name}" without confirmation`,
          "pass --yes to delete it",
        )
      const answer = await ctx.io.prompt(`Delete swarm "${name}"? Its replicas and endpoint stop. [y/N] `)
      if (!/^y(es)?$/i.test(answer.trim()))
        throw new CliError(`swarm "${name}" was not deleted`, ExitCode.error)
    }
    const api = await client(ctx, cmd)
    let swarm = await api.deleteSwarm(name)
    if (o.wait)
      swarm = await waitForSwarm(ctx, api, name, {
        phase: "STOPPED",
        timeoutS: o.timeout,
        again: `swarmplane down ${name} --yes --wait`,
      })
    if (format !== "table") return show(ctx, format, swarm, () => "")
    if (!ctx.io.stdout.isTTY) return out(ctx, swarm.name)
    out(
      ctx,
      swarm.phase === "STOPPED"
        ? `swarm "${name}" is STOPPED`
        : `swarm "${name}" is being deleted (${swarm.phase})`,
    )
  })

  examples(
    program
      .command("status")
      .description("a swarm's phase, readiness and endpoint")
      .argument("<name>", "swarm name")
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane status demo", "swarmplane status demo -o json"],
  ).action(async (name: string, _o: unknown, cmd: Command) => {
    const { format } = common(cmd)
    const { swarm } = await (await client(ctx, cmd)).getSwarm(name)
    show(ctx, format, swarm, () => swarmSummary(ctx.out, swarm))
  })

  const swarm = program.command("swarm").description("list and describe swarms")
  examples(
    swarm
      .command("list")
      .alias("ls")
      .description("list the swarms of the project")
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane swarm list", "swarmplane swarm list -o yaml"],
  ).action(async (_o: unknown, cmd: Command) => {
    const { format } = common(cmd)
    const api = await client(ctx, cmd)
    const { items } = await allPages((page) => api.listSwarms(page))
    show(ctx, format, items, () =>
      items.length
        ? swarmTable(ctx.out, items)
        : "no swarms yet: create one with swarmplane up -f swarm.yaml",
    )
  })

  examples(
    swarm
      .command("metrics")
      .description(
        "a swarm's traffic over the last 1, 5 and 15 minutes: requests/s, errors, latency, time to first token, queue wait, tokens/s; and per replica",
      )
      .argument("<name>", "swarm name")
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane swarm metrics demo", "swarmplane swarm metrics demo -o json"],
  ).action(async (name: string, _o: unknown, cmd: Command) => {
    const { format } = common(cmd)
    const api = await client(ctx, cmd)
    const metrics = await api.swarmMetrics(name)
    show(ctx, format, metrics, () => metricsTable(ctx, metrics))
  })

  examples(
    swarm
      .command("describe")
      .description(
        "everything about a swarm: handle, endpoint, replicas, the rollout's last step, the autoscaler's decisions and recent events",
      )
      .argument("<name>", "swarm name")
      .addOption(outputOption())
      .addOption(jsonOption()),
    ["swarmplane swarm describe demo"],
  ).action(async (name: string, _o: unknown, cmd: Command) => {
    const { format } = common(cmd)
    const api = await client(ctx, cmd)
    const { swarm } = await api.getSwarm(name)
    if (format !== "table") return show(ctx, format, swarm, () => "")
    out(
      ctx,
      await describe(
        ctx,
        swarm,
        () => allPages((page) => api.swarmEvents(name, page)),
        (id) => allPages((page) => api.jobEvents(id, page)),
      ),
    )
  })
}

/** The windows of `swarm metrics` as a table: one row per window. */
function metricsTable(ctx: Ctx, m: SwarmMetrics): string {
  const windows = (["1m", "5m", "15m"] as const).flatMap((w) => {
    const f = m.windows[w]
    return f ? [[w, f] as const] : []
  })
  if (!windows.length)
    return m.sampledAt
      ? `no traffic figures for ${m.name} yet: its router was sampled at ${m.sampledAt}; the next sample (within 10 s) starts the first window`
      : `no metrics for ${m.name} yet: they come from its router (swarms on workers and slurm backends), sampled every 10 s at most`
  const s = (x: number | null | undefined) =>
    x === undefined
      ? "-"
      : x === null
        ? "> 120 s"
        : x < 1
          ? `${(x * 1000).toFixed(0)} ms`
          : `${x.toFixed(1)} s`
  const rows = windows.map(([w, f]) => [
    w,
    f.requestsPerS.toFixed(2),
    f.errorRate === undefined ? "-" : `${(f.errorRate * 100).toFixed(1)}%`,
    `${s(f.latencyP50S)} / ${s(f.latencyP99S)}`,
    `${s(f.ttftP50S)} / ${s(f.ttftP99S)}`,
    `${s(f.queueWaitP50S)} / ${s(f.queueWaitP99S)}`,
    f.tokensPerS.toFixed(1),
  ])
  const replicas = (m.replicas ?? []).map((r) => [
    r.slot === undefined ? "-" : String(r.slot),
    r.generation === undefined ? "-" : String(r.generation),
    r.url,
    String(r.inFlight),
    r.meanInFlight === undefined ? "-" : r.meanInFlight.toFixed(1),
    r.requestsPerS.toFixed(2),
    r.errorRate === undefined ? "-" : `${(r.errorRate * 100).toFixed(1)}%`,
    `${s(r.ttftP50S)} / ${s(r.ttftP99S)}`,
    r.tokensPerS.toFixed(1),
  ])
  return [
    table(
      ctx.out,
      [
        "window",
        "req/s",
        "errors",
        "latency p50 / p99",
        "first token p50 / p99",
        "queue wait p50 / p99",
        "tokens/s",
      ],
      rows,
    ),
    `in flight ${m.inFlight ?? 0}, sampled at ${m.sampledAt}`,
    ...(replicas.length
      ? [
          "",
          `Per replica, over the last ${Math.round(m.replicas[0]!.seconds)} s:`,
          table(
            ctx.out,
            [
              "slot",
              "gen",
              "replica",
              "in flight",
              "mean",
              "req/s",
              "errors",
              "first token p50 / p99",
              "tokens/s",
            ],
            replicas,
          ),
        ]
      : []),
  ].join("\n")
}

async function describe(
  ctx: Ctx,
  s: Swarm,
  swarmEvents: () => Promise<{ items: Event[] }>,
  events: (jobId: string) => Promise<{ items: Event[] }>,
): Promise<string> {
  const p = ctx.out
  const meta = s.handle
    ? Object.entries(s.handle.meta)
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(" ")
    : ""
  let text = block(p, [
    ...swarmPairs(p, s),
    ["Generation", `${s.generation} (applied: ${s.observedGeneration})`],
    ["Handle", s.handle ? `${s.handle.id}${meta ? `  ${meta}` : ""}` : "(none yet: not deployed)"],
    [
      "Resources",
      `${s.gpusPerReplica} GPU, ${s.cpusPerReplica} CPU, ${s.memoryMiBPerReplica} MiB per replica`,
    ],
    ["Image", s.image],
    ["Created", `${s.createdAt} (${age(s.createdAt)} ago)`],
  ])
  const anyReplica = s.replicaStatus.items.length > 0 || (s.replicaSet?.replicas.length ?? 0) > 0
  text += `\n${p.bold("Replicas:")}\n${anyReplica ? replicaTable(p, s) : "(none reported yet)\n"}`
  const own = await swarmEvents().then(
    (res) => res.items.slice(-10),
    () => [],
  )
  text += `\n${p.bold("Events:")}\n${own.length ? eventTable(p, own) : "(none)\n"}`
  // On `workers` backends the handle names the job that runs the replicas and router, whose events
  // show what happened to them.
  const jobId =
    isRecord(s.handle?.meta) && typeof s.handle?.meta.job === "string" ? s.handle.meta.job : undefined
  if (!jobId) return text
  const recent = await events(jobId).then(
    (res) => res.items.slice(-20),
    () => undefined,
  )
  if (!recent) return text
  text += `\n${p.bold(`Events (of its serving job ${jobId}, the last ${recent.length}):`)}\n`
  return text + (recent.length ? eventTable(p, recent) : "(none)\n")
}
