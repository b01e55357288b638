/**
 * A fake NVIDIA DGX Cloud Lepton workspace that really runs what it is given, for the `lepton`
 * backend's tests (and a laptop user): `startFakeLepton()` serves Part A of the backend contracts on
 * 127.0.0.1 and returns the workspace base URL (what `LEPTON_WORKSPACE_URL` would hold), its token,
 * and the controls a test drives: capacity, injected faults, killed replicas and workers, scripted job
 * failures, archival. `stop()` ends every process the fake started.
 */
import type { AddressInfo } from "node:net"
import { serve } from "@hono/node-server"
import { processRunner } from "../local-processes"
import { type FakeLeptonState, type Fault, fakeLeptonApp } from "./app"
import { Deployments } from "./deployments"
import { Jobs } from "./jobs"
import { DefaultNodeGroup, type FakeNodeGroup, NodeGroups, type Placement } from "./node-groups"
import { Workspace } from "./state"

export type { Fault } from "./app"
export type { FakeNodeGroup, Placement } from "./node-groups"

export interface FakeLeptonOptions {
  workspaceId?: string
  token?: string
  /** User secrets, for `envs[].value_from.secret_name_ref`. */
  secrets?: Record<string, string>
  /** Processes (replicas plus job workers) that may run at once. Default: unbounded. */
  capacity?: number
  /** A replica whose process exits is started again (default) or left failed (`false`). */
  restartReplicas?: boolean
  /** How long a started job worker takes to count as ready (worker i: (i + 1) times this). Default 100. */
  workerReadyMs?: number
  /** Finished jobs move to the archive this long after they end (by `now`). Default: never. */
  archiveAfterMs?: number
  /** The clock of `created_at`, `creation_time` and the like. Default `Date.now`. */
  now?: () => number
  /**
   * The most jobs a list page holds, whatever `page_size` asks (the real service's cap is not
   * documented; a client must page on until an empty page). Default: none.
   */
  maxPageSize?: number
  /**
   * The workspace's dedicated node groups. Default: one, `ng-fake0001` named `fake-node-group`. Work
   * whose affinity names another id (a group's name, say) is refused with a 400.
   */
  nodeGroups?: FakeNodeGroup[]
}

export interface FakeLepton {
  /** The workspace base: `http://127.0.0.1:PORT/api/v2/workspaces/<workspaceId>`. */
  readonly url: string
  readonly token: string
  readonly workspaceId: string
  /** Another workspace on the same fake, whose token this workspace answers with 403. */
  readonly otherWorkspace: { id: string; token: string; url: string }
  /** Requests the API received, in order (method, the path after the workspace base, the query). */
  readonly requests: { method: string; path: string; query: string }[]
  /** The node group ids each created job and deployment asked for, in order. */
  readonly placements: Placement[]
  /** The next matching requests answer with this fault instead (e.g. a 429 with `Retry-After`). */
  injectFault(fault: Fault): void
  /** Set the capacity; waiting replicas and queued jobs start when it grows. */
  setCapacity(processes: number): void
  setSecret(name: string, value: string): void
  /** Kill a deployment's replica (the first Ready one unless named); returns its id. */
  killReplica(deployment: string, replicaId?: string): string
  /** Whether a replica whose process exits is started again. */
  setRestartReplicas(restart: boolean): void
  /** The next job created with this requested name fails on this worker (exit 1). */
  scriptJobFailure(name: string, workerIndex?: number): void
  /** Kill a job worker's processes, as the loss of its node would. */
  killJobWorker(jobId: string, workerIndex?: number): void
  /** Move the finished jobs to the archive; returns how many moved. */
  archiveFinishedJobs(): number
  /** Pids of the processes the fake runs now. */
  livePids(): number[]
  stop(): Promise<void>
}

export async function startFakeLepton(options: FakeLeptonOptions = {}): Promise<FakeLepton> {
  const workspaceId = options.workspaceId ?? "ws-fake"
  const token = options.token ?? "fake-lepton-token"
  const other = { id: `${workspaceId}-other`, token: `${token}-other` }
  const runner = processRunner()
  const ws = new Workspace(
    workspaceId,
    runner,
    options.now ?? Date.now,
    new Map(Object.entries(options.secrets ?? {})),
  )
  ws.capacity = options.capacity ?? Number.POSITIVE_INFINITY
  const nodeGroups = new NodeGroups(ws, options.nodeGroups ?? [DefaultNodeGroup])
  const state: FakeLeptonState = {
    ws,
    token,
    others: new Map([[other.id, other.token]]),
    deployments: new Deployments(ws, {
      restartReplicas: options.restartReplicas ?? true,
      place: (id, affinity) => nodeGroups.place("deployment", id, affinity),
    }),
    jobs: new Jobs(ws, {
      workerReadyMs: options.workerReadyMs ?? 100,
      archiveAfterMs: options.archiveAfterMs ?? Number.POSITIVE_INFINITY,
      place: (id, affinity) => nodeGroups.place("job", id, affinity),
    }),
    nodeGroups,
    faults: [],
    requests: [],
    maxPageSize: options.maxPageSize ?? Number.POSITIVE_INFINITY,
  }
  const app = fakeLeptonApp(state)
  const server = await new Promise<ReturnType<typeof serve>>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s))
    s.once("error", reject)
  })
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  ws.origin = origin
  const base = (id: string) => `${origin}/api/v2/workspaces/${id}`
  let stopped: Promise<void> | undefined

  return {
    url: base(workspaceId),
    token,
    workspaceId,
    otherWorkspace: { ...other, url: base(other.id) },
    requests: state.requests,
    placements: nodeGroups.placements,
    injectFault: (fault) => void state.faults.push({ ...fault }),
    setCapacity(processes) {
      ws.capacity = processes
      ws.pump()
    },
    setSecret: (name, value) => void ws.secrets.set(name, value),
    killReplica: (deployment, replicaId) => state.deployments.kill(deployment, replicaId),
    setRestartReplicas(restart) {
      state.deployments.options.restartReplicas = restart
    },
    scriptJobFailure: (name, workerIndex) => state.jobs.scriptFailure(name, workerIndex),
    killJobWorker: (jobId, workerIndex) => state.jobs.killWorker(jobId, workerIndex),
    archiveFinishedJobs: () => state.jobs.archiveFinished(),
    livePids: () => runner.livePids(),
    stop() {
      stopped ??= (async () => {
        state.deployments.stopAll()
        state.jobs.stopAll()
        await runner.stopAll()
        await new Promise<void>((resolve) => {
          server.close(() => resolve())
          // Kept-alive client connections would hold the close open.
          if ("closeAllConnections" in server) server.closeAllConnections()
        })
      })()
      return stopped
    },
  }
}
