/**
 * SSH cost of a reconcile pass on a real Slurm cluster (scripts/slurm-dev-cluster.sh) with 10, 100 and
 * 1,000 active tasks (arrays of 10) and 2 swarms: SSH connects and commands per pass, and time.
 * swarmplane keeps one connection per login across passes and folds the swarms into the pass's one
 * command; the baseline, run in the same process on the same jobs, is what it did before: a new
 * connection every pass and one more command per swarm.
 */
import { isServing, type TaskBackend, type TaskRef } from "@swarmplane/core/backends/protocol"
import { createBackend } from "@swarmplane/core/backends/registry"
import { SshSession } from "@swarmplane/core/backends/slurm/ssh"
import { closeSharedSessions } from "@swarmplane/core/backends/slurm/ssh-pool"
import { BackendConfig } from "@swarmplane/core/model/backend"
import { JobSpec } from "@swarmplane/core/model/job"
import { type Swarm, SwarmSpec } from "@swarmplane/core/model/swarm"
import { MemoryQueue } from "@swarmplane/core/queue/memory"
import { createRuntime, type Runtime } from "@swarmplane/core/runtime"
import { MemoryStore } from "@swarmplane/core/store/memory"
import { silentLogger } from "@swarmplane/core/util/logger"
import { assignedRefs } from "../test/support/assigned"
import { privateKeyOf, sessionTo, slurmConfigOf, slurmConnection } from "../test/support/slurm"
import { median, table } from "./util"

const Sizes = [10, 100, 1000]
const TasksPerJob = 10
const Swarms = 2
const Passes = 3

type Variant = "swarmplane" | "baseline"
const label: Record<Variant, string> = {
  swarmplane: "kept connection, one command for jobs and swarms",
  baseline: "baseline: connection per pass, a command per swarm",
}

/** `n` tasks as arrays of 10, submitted and live (most wait in Slurm's queue: the node has 8 CPUs). */
async function launchTasks(rt: Runtime, backend: TaskBackend, n: number, tag: string): Promise<TaskRef[]> {
  const refs: TaskRef[] = []
  for (let j = 0; j < n / TasksPerJob; j++) {
    const job = await rt.transitions.jobs.create(
      "bench",
      `job-${tag}-${j}`,
      JobSpec.parse({ command: ["sleep", "600"], tasks: TasksPerJob, resources: { cpu: 1, memoryMiB: 64 } }),
      "bench",
    )
    for (const task of (await rt.repos.jobs.load("bench", job.id))!.tasks) refs.push({ job, task })
  }
  let k = 0
  const plan = await backend.schedule({ pending: refs, live: [], mintAttemptUid: () => `a-${tag}-${k++}` })
  const assigned = assignedRefs(plan)
  const { launched } = await backend.launch({ attempts: assigned })
  return launched.map(({ ref, target }) => ({
    ...ref,
    task: {
      ...ref.task,
      data: { ...ref.task.data, attempts: ref.task.data.attempts.map((a) => ({ ...a, target })) },
    },
  }))
}

export async function main(): Promise<void> {
  const c = slurmConnection()
  if (!c) return
  const key = privateKeyOf(c)
  const rt = createRuntime({
    store: MemoryStore(),
    queue: MemoryQueue(),
    logger: silentLogger,
    pepper: "b",
    secrets: { get: async () => key },
  })
  const record = {
    id: "bench",
    project: "bench",
    kind: "delegated" as const,
    config: BackendConfig.parse(slurmConfigOf(c)),
    status: {},
    createdAt: "",
    updatedAt: "",
  }
  // The Slurm backend serves swarms as well as running tasks.
  const open = async () => {
    const backend = await createBackend(record, rt)
    if (!isServing(backend)) throw new Error("a slurm backend serves swarms")
    return backend
  }
  const setup = await open()
  const now = new Date().toISOString()
  const swarms: Swarm[] = []
  for (let i = 0; i < Swarms; i++) {
    const swarm: Swarm = {
      ...SwarmSpec.parse({
        name: `bench-${i}`,
        model: "m",
        command: ["sleep", "600"],
        memoryMiBPerReplica: 64,
      }),
      project: "bench",
      phase: "PENDING",
      desired: "running",
      generation: 1,
      observedGeneration: 0,
      replicaStatus: { ready: 0, total: 1, items: [] },
      createdAt: now,
      updatedAt: now,
    }
    swarms.push({ ...swarm, handle: await setup.createOrUpdate(swarm, 0) })
  }
  const rows: { size: number; variant: Variant; connects: number; commands: number; ms: number }[] = []
  const arrays = new Set<string>()
  try {
    for (const size of Sizes) {
      const live = await launchTasks(rt, setup, size, `n${size}`)
      for (const ref of live) arrays.add(ref.task.data.attempts[0]!.target!.split("_")[0]!)
      for (let pass = 0; pass <= Passes; pass++)
        for (const variant of ["swarmplane", "baseline"] as const) {
          if (variant === "baseline") closeSharedSessions()
          const [connects, commands] = [SshSession.totalConnects, SshSession.totalCommands]
          const t0 = performance.now()
          const backend = await open()
          await backend.reconcile({ live, ...(variant === "swarmplane" ? { swarms } : {}) })
          for (const swarm of swarms) await backend.servingStatus(swarm)
          await backend.close()
          // Pass 0 warms up (the kept connection is made there).
          if (pass > 0)
            rows.push({
              size,
              variant,
              connects: SshSession.totalConnects - connects,
              commands: SshSession.totalCommands - commands,
              ms: performance.now() - t0,
            })
        }
    }
  } finally {
    const cleanup = await open()
    for (const swarm of swarms) await cleanup.delete(swarm, 0)
    await cleanup.close()
    const session = sessionTo(c, 120)
    if (arrays.size) await session.exec(`scancel ${[...arrays].join(" ")}`)
    session.close()
    await setup.close()
    closeSharedSessions()
  }
  console.log(
    `\nA reconcile pass over SSH on Slurm ${c.version}: ${Swarms} swarms and N active tasks in arrays of ${TasksPerJob} (median of ${Passes} passes after a warm-up)\n`,
  )
  const lines: string[][] = []
  for (const size of Sizes) {
    const of = (variant: Variant) => rows.filter((r) => r.size === size && r.variant === variant)
    const base = median(of("baseline").map((r) => r.ms))
    for (const variant of ["swarmplane", "baseline"] as const) {
      const r = of(variant)
      lines.push([
        size.toLocaleString("en"),
        label[variant],
        median(r.map((x) => x.connects)).toFixed(1),
        median(r.map((x) => x.commands)).toFixed(1),
        median(r.map((x) => x.ms)).toFixed(0),
        (base / median(r.map((x) => x.ms))).toFixed(1),
      ])
    }
  }
  console.log(
    table(
      [
        "active tasks",
        "variant",
        "SSH connects / pass",
        "SSH commands / pass",
        "ms / pass",
        "× faster than baseline",
      ],
      lines,
    ),
  )
}
