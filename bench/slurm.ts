/**
 * SSH commands per reconcile pass on a real Slurm cluster (scripts/slurm-dev-cluster.sh), with 200
 * active jobs: swarmplane's one batched command (squeue + scontrol/sacct fallbacks) against a baseline
 * that asks about each job on its own (`squeue -j`), both in this process on the same jobs.
 */

import type { TaskRef } from "@swarmplane/core/backends/protocol"
import { createBackend } from "@swarmplane/core/backends/registry"
import { SshSession } from "@swarmplane/core/backends/slurm/ssh"
import { BackendConfig } from "@swarmplane/core/model/backend"
import { JobSpec } from "@swarmplane/core/model/job"
import { MemoryQueue } from "@swarmplane/core/queue/memory"
import { createRuntime } from "@swarmplane/core/runtime"
import { MemoryStore } from "@swarmplane/core/store/memory"
import { silentLogger } from "@swarmplane/core/util/logger"
import { privateKeyOf, slurmConnection } from "../test/support/slurm"
import { median, table } from "./util"

const Jobs = 200

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
  const config = BackendConfig.parse({
    type: "slurm",
    loginHost: c.host,
    port: c.port,
    user: c.user,
    sshKeySecret: "k",
    hostKey: c.hostKey,
    partition: c.partition,
  })
  const record = {
    id: "bench",
    project: "bench",
    kind: "delegated" as const,
    config,
    status: {},
    createdAt: "",
    updatedAt: "",
  }
  let backend = createBackend(record, rt)

  // 1. 200 jobs of one task each, submitted (most wait in the queue: the node has 8 CPUs).
  const refs: TaskRef[] = []
  for (let i = 0; i < Jobs; i++) {
    const job = await rt.repos.jobs.create(
      "bench",
      `job-bench-${i}`,
      JobSpec.parse({ command: ["sleep", "120"] }),
      "bench",
    )
    const task = (await rt.repos.jobs.load("bench", job.id))!.tasks[0]!
    refs.push({ job, task })
  }
  let n = 0
  const plan = await backend.schedule({ pending: refs, live: [], mintAttemptUid: () => `a-bench-${n++}` })
  const assigned: TaskRef[] = plan.assignments.map((a) => ({
    job: a.ref.job,
    task: {
      ...a.ref.task,
      data: {
        ...a.ref.task.data,
        state: "ASSIGNED",
        attempts: [
          {
            attemptUid: a.attemptUid,
            state: "ASSIGNED",
            submission: a.submission!,
            createdAt: new Date().toISOString(),
          },
        ],
      },
    },
  }))
  const launched = await backend.launch({ attempts: assigned })
  const live: TaskRef[] = launched.launched.map(({ ref, target }) => ({
    ...ref,
    task: {
      ...ref.task,
      data: { ...ref.task.data, attempts: ref.task.data.attempts.map((a) => ({ ...a, target })) },
    },
  }))
  await backend.close()

  // 2. Passes: swarmplane's batched reconcile, and the per-job baseline, alternating.
  const rows: { variant: string; commands: number; ms: number }[] = []
  for (let round = 0; round < 3; round++) {
    backend = createBackend(record, rt)
    const before = SshSession.totalCommands
    const t0 = performance.now()
    await backend.reconcile({ live })
    rows.push({
      variant: "reconcile (one batched command)",
      commands: SshSession.totalCommands - before,
      ms: performance.now() - t0,
    })
    await backend.close()

    const session = new SshSession({
      host: c.host,
      port: c.port,
      user: c.user,
      privateKey: key,
      hostKey: c.hostKey,
      connectTimeoutS: 10,
      commandTimeoutS: 60,
    })
    const b0 = SshSession.totalCommands
    const t1 = performance.now()
    for (const ref of live)
      await session.exec(`squeue -h -t all -j ${ref.task.data.attempts[0]!.target} -o '%T'`)
    rows.push({
      variant: "baseline: squeue -j per job",
      commands: SshSession.totalCommands - b0,
      ms: performance.now() - t1,
    })
    session.close()
  }
  const msOf = (variant: string) => median(rows.filter((r) => r.variant === variant).map((r) => r.ms))
  const base = msOf("baseline: squeue -j per job")
  console.log(
    `\nReconciling ${Jobs} active Slurm jobs over SSH (Slurm ${c.version}; median of 3 passes; connect included)\n`,
  )
  const variants = ["reconcile (one batched command)", "baseline: squeue -j per job"]
  console.log(
    table(
      ["variant", "SSH commands per pass", "ms per pass", "× faster than baseline"],
      variants.map((variant) => [
        variant,
        String(rows.find((r) => r.variant === variant)!.commands),
        msOf(variant).toFixed(0),
        (base / msOf(variant)).toFixed(1),
      ]),
    ),
  )

  // 3. Clean up: cancel the bench's arrays by id.
  const cleanup = new SshSession({
    host: c.host,
    port: c.port,
    user: c.user,
    privateKey: key,
    hostKey: c.hostKey,
    connectTimeoutS: 10,
    commandTimeoutS: 60,
  })
  const ids = [...new Set(live.map((ref) => ref.task.data.attempts[0]!.target!.split("_")[0]!))]
  const out = await cleanup.exec(
    `scancel ${ids.join(" ")}; squeue -h -t PENDING,RUNNING -j ${ids.join(",")} -o %i | wc -l`,
  )
  if (out.stdout.trim() !== "0") console.warn(`bench: ${out.stdout.trim()} jobs still queued after scancel`)
  cleanup.close()
}
