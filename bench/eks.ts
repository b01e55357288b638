/**
 * Kubernetes API calls of a reconcile pass on an `eks` backend, against the fake EKS cluster running
 * Kueue (test/support/fake-kube/), with 500 active tasks and, beside it in the same process, 50: the
 * baseline the 500 are set against. Each size is its own backend in its own namespace, whose
 * ClusterQueue admits only a few tasks: those run (`sleep`), the rest stay suspended with pending
 * Workloads, and every pass still observes all of them (the "running / waiting" column is what the
 * store holds after the pass). The table counts, per pass, the requests the fake served by verb and
 * resource (each page of a LIST counts), and the calls per active task: a few LISTs per namespace
 * whatever the number of tasks, never one GET per task. The same two sizes on a `lepton` backend
 * (test/support/fake-lepton/, a workspace per size that runs only a few jobs at once) follow.
 *
 * `npm run bench -- eks`. */
import { reconcilePass } from "@swarmplane/core/control/reconcile"
import { BackendConfig } from "@swarmplane/core/model/backend"
import { JobSpec } from "@swarmplane/core/model/job"
import { MemoryQueue } from "@swarmplane/core/queue/memory"
import { createRuntime, type Runtime } from "@swarmplane/core/runtime"
import { MemoryStore } from "@swarmplane/core/store/memory"
import { memoryLogger } from "@swarmplane/core/util/logger"
import { defaultUser, type FakeKube, startFakeKube, Types, workloadName } from "../test/support/fake-kube"
import { isObject } from "../test/support/fake-kube/resources"
import { startFakeLepton } from "../test/support/fake-lepton"
import { until } from "../test/support/plane"
import { table } from "./util"

const Sizes = [50, 500]
const TasksPerJob = 10
/** Tasks that run at once per size: each ClusterQueue has 1 CPU for tasks of a quarter (on Lepton, the capacity). */
const Admitted = 4
const TaskCpu = 0.25
/** Passes after the one that creates the Jobs. */
const Passes = 3
const Project = "bench"

const namespaceOf = (size: number) => `bench-${size}`

/** The fake's Kubernetes API requests in `seen`, by column: each LIST page, single GETs, creates, deletes. */
function tallyKube(seen: readonly { method: string; path: string }[]) {
  const counts = { jobs: 0, pods: 0, workloads: 0, get: 0, post: 0, delete: 0, other: 0 }
  for (const r of seen) {
    const list = /\/namespaces\/[^/]+\/(jobs|pods|workloads)$/.exec(r.path)
    if (r.method === "GET" && list) counts[list[1] as "jobs" | "pods" | "workloads"]++
    else if (r.method === "GET") counts.get++
    else if (r.method === "POST") counts.post++
    else if (r.method === "DELETE") counts.delete++
    else counts.other++
  }
  return { ...counts, total: seen.length }
}

/** The fake Lepton's requests in `seen`: each page of the job list, the deployment list, the rest. */
function tallyLepton(seen: readonly { method: string; path: string }[]) {
  const counts = { jobs: 0, deployments: 0, get: 0, post: 0, other: 0 }
  for (const r of seen) {
    if (r.method === "GET" && /\/jobs$/.test(r.path)) counts.jobs++
    else if (r.method === "GET" && /\/deployments$/.test(r.path)) counts.deployments++
    else if (r.method === "GET") counts.get++
    else if (r.method === "POST") counts.post++
    else counts.other++
  }
  return { ...counts, total: seen.length }
}

/** `size` tasks of `sleep 600` in jobs of 10 on `backendId`; their job ids. */
async function submit(rt: Runtime, backendId: string, size: number): Promise<string[]> {
  const spec = JobSpec.parse({
    command: ["sleep", "600"],
    tasks: TasksPerJob,
    resources: { cpu: TaskCpu, memoryMiB: 64 },
  })
  const ids: string[] = []
  for (let j = 0; j < size / TasksPerJob; j++)
    ids.push((await rt.transitions.jobs.create(Project, `${backendId}-job-${j}`, spec, backendId)).id)
  return ids
}

/** What the store holds after a pass: tasks running, and tasks waiting with the substrate's reason. */
async function observed(rt: Runtime, jobIds: string[]) {
  let running = 0
  let waiting = 0
  for (const id of jobIds)
    for (const { data } of (await rt.repos.jobs.load(Project, id))?.tasks ?? []) {
      if (data.state === "RUNNING") running++
      else if (data.pendingReason) waiting++
    }
  return { running, waiting }
}

/**
 * One reconcile pass of `backendId` as the plane runs it, with the requests the fake served meanwhile
 * (`requests` is the fake's growing log), counted by `tally`.
 */
async function measuredPass<T>(
  rt: Runtime,
  backendId: string,
  jobIds: string[],
  requests: readonly { method: string; path: string }[],
  tally: (seen: readonly { method: string; path: string }[]) => T & { total: number },
) {
  const record = (await rt.repos.backends.get(Project, backendId))!
  const start = requests.length
  const report = await reconcilePass(rt, record, `bench-${start}`)
  if (report.error) throw new Error(`${backendId}: ${report.error}`)
  return { calls: tally(requests.slice(start)), ...(await observed(rt, jobIds)) }
}

const newRuntime = (secret = "") =>
  createRuntime({
    store: MemoryStore(),
    queue: MemoryQueue(),
    logger: memoryLogger(),
    pepper: "bench",
    secrets: { get: async () => secret },
  })

/** A row's last columns: total, calls per task, and the total against the smallest size's in that pass. */
const ratios = (total: number, size: number, baseTotal: number) => [
  String(total),
  (total / size).toFixed(3),
  (total / baseTotal).toFixed(1),
]

/** How many of `jobIds`' attempts have their Job and its Kueue Workload on the cluster. */
async function withWorkloads(fake: FakeKube, rt: Runtime, namespace: string, jobIds: string[]) {
  let n = 0
  for (const jobId of jobIds)
    for (const task of (await rt.repos.jobs.load(Project, jobId))?.tasks ?? []) {
      const name = task.data.attempts.at(-1)?.target
      const metadata = name ? fake.object(Types.jobs, namespace, name)?.metadata : undefined
      const uid = isObject(metadata) ? metadata.uid : undefined
      if (name && typeof uid === "string" && fake.object(Types.workloads, namespace, workloadName(name, uid)))
        n++
    }
  return n
}

/** The eks backend: both sizes on one fake cluster, each in its own namespace with its own ClusterQueue. */
async function eksRows(): Promise<string[][]> {
  // The plane reaches the cluster with its own AWS credentials (the default provider chain), as a
  // Lambda does: here the fake's IAM user, for this run only (the other benchmarks share the process).
  const credentials = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"]
  const saved = Object.fromEntries(credentials.map((name) => [name, process.env[name]]))
  process.env.AWS_ACCESS_KEY_ID = defaultUser.accessKeyId
  process.env.AWS_SECRET_ACCESS_KEY = defaultUser.secretAccessKey
  delete process.env.AWS_SESSION_TOKEN
  delete process.env.AWS_PROFILE
  const fake = await startFakeKube({
    clusterQueues: Sizes.map((size) => ({
      name: `queue-${size}`,
      flavors: [{ name: "default-flavor", nominalQuota: { cpu: Admitted * TaskCpu, memory: "8Gi" } }],
    })),
    localQueues: Sizes.map((size) => ({
      namespace: namespaceOf(size),
      name: "user-queue",
      clusterQueue: `queue-${size}`,
    })),
  })
  const rt = newRuntime()
  try {
    const backends: { size: number; id: string; jobIds: string[] }[] = []
    for (const size of Sizes) {
      const id = `eks-${size}`
      await rt.repos.backends.put(
        Project,
        id,
        BackendConfig.parse({
          type: "eks",
          clusterName: fake.clusterName,
          region: fake.region,
          endpoint: fake.eksUrl,
          namespace: namespaceOf(size),
          localQueue: "user-queue",
        }),
      )
      backends.push({ size, id, jobIds: await submit(rt, id, size) })
    }
    const rows: string[][] = []
    const passes = async (label: string) => {
      const results = []
      for (const b of backends)
        results.push({ ...b, ...(await measuredPass(rt, b.id, b.jobIds, fake.requests, tallyKube)) })
      for (const r of results)
        rows.push([
          label,
          String(r.size),
          `${r.running} / ${r.waiting}`,
          String(r.calls.jobs),
          String(r.calls.pods),
          String(r.calls.workloads),
          String(r.calls.get),
          String(r.calls.post),
          String(r.calls.delete + r.calls.other),
          ...ratios(r.calls.total, r.size, results[0]!.calls.total),
        ])
    }
    // The first pass creates a Job per task (a POST each); Kueue then admits a few and they run.
    await passes("1 (creates the Jobs)")
    await until(
      `Kueue to admit ${Admitted} tasks per namespace and hold the rest pending`,
      async () => {
        for (const { size, jobIds } of backends)
          if ((await withWorkloads(fake, rt, namespaceOf(size), jobIds)) < size) return false
        return fake.livePids().length === Admitted * Sizes.length
      },
      30_000,
    )
    for (let p = 2; p <= Passes + 1; p++) await passes(String(p))
    return rows
  } finally {
    await fake.stop()
    for (const [name, value] of Object.entries(saved))
      if (value === undefined) delete process.env[name]
      else process.env[name] = value
  }
}

/** The lepton backend: each size on its own fake workspace that runs only a few jobs at once. */
async function leptonRows(): Promise<string[][]> {
  const rows: string[][] = []
  const bySize = new Map<number, { label: string; r: Awaited<ReturnType<typeof leptonPass>> }[]>()
  type Fake = Awaited<ReturnType<typeof startFakeLepton>>
  const leptonPass = (rt: Runtime, jobIds: string[], fake: Fake) =>
    measuredPass(rt, "lepton", jobIds, fake.requests, tallyLepton)
  for (const size of Sizes) {
    const fake = await startFakeLepton({ capacity: Admitted })
    try {
      const rt = newRuntime(fake.token)
      await rt.repos.backends.put(
        Project,
        "lepton",
        BackendConfig.parse({
          type: "lepton",
          workspaceId: fake.workspaceId,
          workspaceUrl: fake.url,
          tokenSecret: "lepton-token",
          nodeGroup: "fake-node-group",
          resourceShape: "cpu.small",
        }),
      )
      const jobIds = await submit(rt, "lepton", size)
      const results = [{ label: "1 (creates the jobs)", r: await leptonPass(rt, jobIds, fake) }]
      await until(
        `the workspace to run ${Admitted} jobs`,
        async () => fake.livePids().length === Admitted,
        30_000,
      )
      for (let p = 2; p <= Passes + 1; p++)
        results.push({ label: String(p), r: await leptonPass(rt, jobIds, fake) })
      bySize.set(size, results)
    } finally {
      await fake.stop()
    }
  }
  for (const [i, { label }] of bySize.get(Sizes[0]!)!.entries())
    for (const size of Sizes) {
      const { r } = bySize.get(size)![i]!
      rows.push([
        label,
        String(size),
        `${r.running} / ${r.waiting}`,
        String(r.calls.jobs),
        String(r.calls.deployments),
        String(r.calls.get),
        String(r.calls.post),
        String(r.calls.other),
        ...ratios(r.calls.total, size, bySize.get(Sizes[0]!)![i]!.r.calls.total),
      ])
    }
  return rows
}

export async function main(): Promise<void> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"
  const eks = await eksRows()
  const lepton = await leptonRows()
  const last = ["total", "calls / task", `× the ${Sizes[0]}`]
  console.log(
    `\nKubernetes API calls of a reconcile pass on an eks backend (fake EKS with Kueue; each size in its own namespace whose ClusterQueue admits ${Admitted}: they run, the rest wait in Kueue; ratios against the ${Sizes[0]} in this run)\n`,
  )
  console.log(
    table(
      [
        "pass",
        "active tasks",
        "running / waiting",
        "LIST jobs (pages)",
        "LIST pods (pages)",
        "LIST workloads (pages)",
        "GET by name",
        "POST",
        "other",
        ...last,
      ],
      eks,
    ),
  )
  console.log(
    `\nThe same on a lepton backend (fake Lepton workspace running ${Admitted} jobs at once, the rest queued; a workspace per size)\n`,
  )
  console.log(
    table(
      [
        "pass",
        "active tasks",
        "running / waiting",
        "GET jobs (pages)",
        "GET deployments",
        "other GET",
        "POST",
        "other",
        ...last,
      ],
      lepton,
    ),
  )
}

if (import.meta.url === `file://${process.argv[1]}`) await main()
