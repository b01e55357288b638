/**
 * From submission to RUNNING on a real Slurm cluster (scripts/slurm-dev-cluster.sh): 8 one-task jobs
 * (one CPU each: all fit the dev node at once) submitted through swarmplane's control loop at the local
 * plane's cadence (a pass at once, as the schedule request triggers, then one a second), against the
 * floor in the same process: the same 8 jobs sent by `sbatch` over one SSH session. Two clocks: when the
 * observer saw RUNNING (swarmplane's task state; `squeue` polled every 250 ms for the floor), and when
 * Slurm says the job started (`squeue` StartTime − the submission; Slurm keeps whole seconds).
 */
import { parseSubmission } from "@swarmplane/core/backends/slurm/backend"
import type { SshSession } from "@swarmplane/core/backends/slurm/ssh"
import { closeSharedSessions } from "@swarmplane/core/backends/slurm/ssh-pool"
import { reconcileTick } from "@swarmplane/core/control/ticks"
import { BackendConfig } from "@swarmplane/core/model/backend"
import { JobSpec } from "@swarmplane/core/model/job"
import { MemoryQueue } from "@swarmplane/core/queue/memory"
import { createRuntime } from "@swarmplane/core/runtime"
import { MemoryStore } from "@swarmplane/core/store/memory"
import { silentLogger } from "@swarmplane/core/util/logger"
import { privateKeyOf, sessionTo, slurmConfigOf, slurmConnection } from "../test/support/slurm"
import { record, table } from "./util"

const Jobs = 8
const Command = "sleep 20"
const PassEveryMs = 1_000
const DeadlineMs = 90_000

interface Figures {
  /** Submission → the observer saw RUNNING, ms per job. */
  seen: number[]
  /** Submission → Slurm's Start, ms per job (whole seconds on Slurm's side). */
  started: number[]
}

const percentile = (xs: number[], p: number) => {
  const sorted = xs.slice().sort((a, b) => a - b)
  return (
    sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN
  )
}

/** Slurm's StartTime of each named running job (epoch ms), from `squeue` (whole seconds). */
async function slurmStarts(session: SshSession, names: string[]): Promise<Map<string, number>> {
  const out = await session.exec(`squeue -h -t R -o '%j|%S' -n ${names.join(",")}`)
  const starts = new Map<string, number>()
  for (const line of out.stdout.trim().split("\n")) {
    const [name, start] = line.split("|")
    const at = Date.parse(start ?? "")
    if (name && Number.isFinite(at)) starts.set(name, at)
  }
  return starts
}

/** The floor: `sbatch` straight over SSH, then `squeue` until every job runs. */
async function floor(session: SshSession, partition: string, tag: string): Promise<Figures> {
  const names = Array.from({ length: Jobs }, (_, i) => `lat-floor-${tag}-${i}`)
  const submitted = new Map<string, number>()
  const ids: string[] = []
  for (const name of names) {
    submitted.set(name, Date.now())
    const out = await session.exec(
      `sbatch --parsable -p ${partition} -c 1 --mem=64M -J ${name} -o /dev/null --wrap '${Command}'`,
    )
    ids.push(out.stdout.trim().split(";")[0]!)
  }
  const seen = new Map<string, number>()
  const end = Date.now() + DeadlineMs
  while (seen.size < Jobs && Date.now() < end) {
    const out = await session.exec(`squeue -h -t R -o %j -j ${ids.join(",")}`)
    for (const name of out.stdout.trim().split("\n"))
      if (submitted.has(name) && !seen.has(name)) seen.set(name, Date.now() - submitted.get(name)!)
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  const starts = await slurmStarts(session, names)
  await session.exec(`scancel ${ids.join(" ")}`)
  return {
    seen: [...seen.values()],
    started: names.flatMap((n) => (starts.has(n) ? [starts.get(n)! - submitted.get(n)!] : [])),
  }
}

/** Through swarmplane: jobs made as the API makes them, passes at the local plane's cadence. */
async function throughSwarmplane(
  session: SshSession,
  config: BackendConfig,
  key: string,
  tag: string,
): Promise<Figures> {
  const rt = createRuntime({
    store: MemoryStore(),
    queue: MemoryQueue(),
    logger: silentLogger,
    pepper: "b",
    secrets: { get: async () => key },
  })
  await rt.repos.backends.put("bench", "hpc", config)
  const submitted = new Map<string, number>()
  for (let i = 0; i < Jobs; i++) {
    const id = `lat-${tag}-${i}`
    submitted.set(id, Date.now())
    await rt.transitions.jobs.create(
      "bench",
      id,
      JobSpec.parse({ command: ["sh", "-c", Command], tasks: 1, resources: { cpu: 1, memoryMiB: 64 } }),
      "hpc",
    )
  }
  const seen = new Map<string, number>()
  const names = new Map<string, string>()
  const end = Date.now() + DeadlineMs
  try {
    while (seen.size < Jobs && Date.now() < end) {
      const passStarted = Date.now()
      await reconcileTick(rt)
      for (const id of submitted.keys()) {
        const task = (await rt.repos.jobs.load("bench", id))?.tasks[0]?.data
        const attempt = task?.attempts.at(-1)
        const name = parseSubmission(attempt?.submission)?.name
        if (name) names.set(id, name)
        if (task?.state === "RUNNING" && !seen.has(id)) seen.set(id, Date.now() - submitted.get(id)!)
      }
      await new Promise((resolve) =>
        setTimeout(resolve, Math.max(0, PassEveryMs - (Date.now() - passStarted))),
      )
    }
    const starts = await slurmStarts(session, [...names.values()])
    return {
      seen: [...seen.values()],
      started: [...names].flatMap(([id, name]) =>
        starts.has(name) ? [starts.get(name)! - submitted.get(id)!] : [],
      ),
    }
  } finally {
    if (names.size) await session.exec(`scancel -n ${[...names.values()].join(",")}`)
  }
}

export async function main(): Promise<void> {
  const c = slurmConnection()
  if (!c) return
  const key = privateKeyOf(c)
  const session = sessionTo(c)
  const config = BackendConfig.parse(slurmConfigOf(c))
  const tag = Date.now().toString(36)
  try {
    const base = await floor(session, c.partition, tag)
    const ours = await throughSwarmplane(session, config, key, tag)
    const row = (label: string, f: Figures) => [
      label,
      `${f.seen.length}/${Jobs}`,
      percentile(f.seen, 50).toFixed(0),
      percentile(f.seen, 99).toFixed(0),
      percentile(f.started, 50).toFixed(0),
      percentile(f.started, 99).toFixed(0),
      (percentile(f.seen, 50) / percentile(base.seen, 50)).toFixed(2),
    ]
    console.log(
      `\nSubmission to RUNNING on Slurm ${c.version}: ${Jobs} one-task jobs (\`${Command}\`, 1 CPU each), swarmplane passes every ${PassEveryMs} ms\n`,
    )
    console.log(
      table(
        [
          "path",
          "running",
          "seen RUNNING p50 ms",
          "p99 ms",
          "Slurm Start p50 ms",
          "p99 ms",
          "× the floor (seen, p50)",
        ],
        [row("sbatch over SSH (floor)", base), row("through swarmplane", ours)],
      ),
    )
    record({
      slurmSubmittedToRunning: {
        floor: { seenP50: percentile(base.seen, 50), seenP99: percentile(base.seen, 99) },
        swarmplane: {
          seenP50: percentile(ours.seen, 50),
          seenP99: percentile(ours.seen, 99),
          slurmStartP50: percentile(ours.started, 50),
          slurmStartP99: percentile(ours.started, 99),
        },
      },
    })
  } finally {
    session.close()
    closeSharedSessions()
  }
}
