/**
 * The fake Lepton's deployments: each replica is a real echo-model process
 * (`swarmplane-agent echo-server`), Ready once its `/health` answers 200, and the deployment's
 * `external_endpoint` is a route of the fake that round-robins the Ready replicas (and checks the
 * deployment's `api_tokens` when one has a value). Scaling is PATCHing `min_replicas`; a replica that
 * finds no free capacity waits with readiness reason `NoCapacity` until capacity frees or grows.
 */
import type { LocalProcess } from "../local-processes"
import {
  invalid,
  isObject,
  type Json,
  type JsonObject,
  LeptonError,
  mergePatch,
  metadata,
  notFound,
  type ReplicaLog,
  suffix,
  type Workspace,
} from "./state"
import { checkSpec, desiredReplicas, replicaSpec, replicaView, stringLabels } from "./wire"

const agentBin = new URL("../../../packages/agent/bin/swarmplane-agent.mjs", import.meta.url).pathname
const repoRoot = new URL("../../../", import.meta.url).pathname
const healthPollMs = 100
const namePattern = /^[a-z][a-z0-9-]{0,35}$/

type ReplicaPhase = "NoCapacity" | "InProgress" | "Ready" | "SystemError" | "Deleting"

interface Replica {
  id: string
  createdAt: number
  phase: ReplicaPhase
  message: string
  process?: LocalProcess
  url?: string
  /** Past processes of this replica, for `/termination`. */
  terminations: JsonObject[]
  startedAt?: number
}

interface Deployment {
  id: string
  metadata: JsonObject
  spec: JsonObject
  replicas: Replica[]
  everReady: boolean
  /** A PATCH changed what the replicas run: they are being replaced (state Updating until Ready). */
  updating: boolean
  nextReplica: number
}

export interface DeploymentOptions {
  /** A replica whose process exits is started again (true) or left with readiness reason SystemError (false), one of the contract's reasons. Default true. */
  restartReplicas: boolean
  /**
   * Records a deployment's affinity (`spec.resource_requirement.affinity`) when it is created or a PATCH
   * changes it; throws (a 400) to refuse a node group the workspace does not have.
   */
  place?: (id: string, affinity: Json | undefined) => void
}

export class Deployments {
  private readonly items = new Map<string, Deployment>()

  constructor(
    private readonly ws: Workspace,
    readonly options: DeploymentOptions,
  ) {
    ws.onCapacity(() => {
      for (const d of this.items.values()) this.reconcile(d)
    })
  }

  list(): JsonObject[] {
    return [...this.items.values()].map((d) => this.view(d))
  }

  get(id: string): JsonObject {
    return this.view(this.find(id))
  }

  create(body: Json): JsonObject {
    if (!isObject(body) || !isObject(body.metadata)) throw invalid("metadata: required")
    const id = body.metadata.id ?? body.metadata.name
    if (typeof id !== "string" || !namePattern.test(id))
      throw invalid(`metadata.id: "${String(id)}" must be lowercase letters, digits and dashes (at most 36)`)
    if (this.items.has(id)) throw new LeptonError(409, "AlreadyExists", `deployment ${id} already exists`)
    const spec = checkSpec(body.spec)
    this.ws.resolveEnvs(spec.envs)
    this.options.place?.(id, affinityOf(spec))
    const name = typeof body.metadata.name === "string" ? body.metadata.name : id
    const d: Deployment = {
      id,
      metadata: { ...metadata(id, name, this.ws.now()), ...stringLabels(body.metadata) },
      spec,
      replicas: [],
      everReady: false,
      updating: false,
      nextReplica: 0,
    }
    this.items.set(id, d)
    this.reconcile(d)
    return this.view(d)
  }

  /** A JSON merge patch of the spec; a patch that changes nothing is Lepton's 400. */
  patch(id: string, body: Json, dryRun: boolean): JsonObject {
    const d = this.find(id)
    if (!isObject(body)) throw invalid("body: must be a JSON object")
    const next = checkSpec(mergePatch(d.spec, body.spec ?? {}))
    if (JSON.stringify(next) === JSON.stringify(d.spec)) throw invalid("no valid field to update")
    this.ws.resolveEnvs(next.envs)
    if (dryRun) return { ...this.view(d), spec: next }
    // Moving the replicas to another node group is a placement like the first, checked the same way.
    const affinity = affinityOf(next)
    if (JSON.stringify(affinity) !== JSON.stringify(affinityOf(d.spec))) this.options.place?.(id, affinity)
    const replaced = replicaSpec(next) !== replicaSpec(d.spec)
    d.spec = next
    d.metadata.last_modified_at = this.ws.now()
    d.metadata.version = Number(d.metadata.version ?? 0) + 1
    if (replaced) {
      // What a replica runs changed: replace every replica (the real service rolls them).
      d.updating = true
      for (const r of d.replicas.filter((x) => x.phase !== "Deleting")) this.stopReplica(r, d)
    }
    this.reconcile(d)
    return this.view(d)
  }

  delete(id: string): JsonObject {
    const d = this.find(id)
    this.items.delete(id)
    for (const r of d.replicas) this.stopReplica(r)
    return { ...this.view(d), status: { ...status(this.ws, d), state: "Deleting" } }
  }

  restart(id: string): JsonObject {
    const d = this.find(id)
    for (const r of d.replicas) r.process?.kill("SIGTERM") // the exit handler starts each again
    return this.view(d)
  }

  readiness(id: string): JsonObject {
    const d = this.find(id)
    const out: JsonObject = {}
    for (const r of d.replicas)
      out[r.id] = [
        { reason: r.phase, message: r.message, creationTimestamp: new Date(r.createdAt).toISOString() },
      ]
    return out
  }

  terminations(id: string): JsonObject {
    const out: JsonObject = {}
    for (const r of this.find(id).replicas) out[r.id] = r.terminations
    return out
  }

  replicas(id: string): JsonObject[] {
    return this.find(id).replicas.map((r) => replicaView(r.id, this.ws.now()))
  }

  log(id: string, replicaId: string): ReplicaLog {
    const r = this.find(id).replicas.find((x) => x.id === replicaId)
    if (!r) throw notFound(`replica ${replicaId}`)
    return { text: r.process?.log() ?? "", ...(r.process?.isAlive() ? { live: r.process } : {}) }
  }

  /** Control: kill a replica's process (the first Ready one unless named), as a lost node would. */
  kill(id: string, replicaId?: string): string {
    const d = this.find(id)
    const r = replicaId
      ? d.replicas.find((x) => x.id === replicaId)
      : d.replicas.find((x) => x.phase === "Ready")
    if (!r?.process) throw notFound(`running replica of ${id}`)
    r.process.kill("SIGKILL")
    return r.id
  }

  /** The endpoint: forwards to the next Ready replica, round-robin. */
  async forward(id: string, path: string, request: Request): Promise<Response> {
    const d = this.items.get(id)
    if (!d) return new Response("no such endpoint\n", { status: 404 })
    // A token is a value, or a reference to a workspace secret that holds it (`token_name_ref`).
    const tokens = (Array.isArray(d.spec.api_tokens) ? d.spec.api_tokens : []).flatMap((t) => {
      if (!isObject(t)) return []
      if (typeof t.value === "string") return [t.value]
      const ref = isObject(t.value_from) ? t.value_from.token_name_ref : undefined
      const value = typeof ref === "string" ? this.ws.secrets.get(ref) : undefined
      // A reference to no secret still closes the endpoint: nothing matches it.
      return typeof ref === "string" ? [value ?? `\0unresolved:${ref}`] : []
    })
    const auth = request.headers.get("authorization") ?? ""
    if (tokens.length > 0 && !tokens.some((t) => auth === `Bearer ${t}`))
      return Response.json({ code: "Unauthorized", message: "invalid or missing api token" }, { status: 401 })
    const ready = d.replicas.filter((r) => r.phase === "Ready" && r.url)
    const target = ready[d.nextReplica++ % Math.max(ready.length, 1)]
    if (!target?.url) return new Response("no ready replica\n", { status: 503 })
    const headers = new Headers(request.headers)
    headers.delete("host")
    headers.delete("authorization") // the replica never sees the endpoint's token
    const body =
      request.method === "GET" || request.method === "HEAD" ? undefined : await request.arrayBuffer()
    const upstream = await fetch(`${target.url}${path}`, { method: request.method, headers, body })
    const out = new Headers(upstream.headers)
    out.set("x-lepton-replica", target.id)
    out.delete("content-encoding")
    out.delete("content-length")
    return new Response(upstream.body, { status: upstream.status, headers: out })
  }

  /** Stop every replica's process (the fake's `stop()` waits for the runner afterwards). */
  stopAll(): void {
    for (const d of this.items.values()) for (const r of d.replicas) this.stopReplica(r)
    this.items.clear()
  }

  private find(id: string): Deployment {
    const d = this.items.get(id)
    if (!d) throw notFound(`deployment ${id}`)
    return d
  }

  /** Move the replicas toward `min_replicas`: add or remove replicas, start those capacity allows. */
  private reconcile(d: Deployment): void {
    if (!this.items.has(d.id)) return
    const desired = desiredReplicas(d.spec)
    const live = d.replicas.filter((r) => r.phase !== "Deleting")
    // Remove the least useful first: waiting, then failed, then starting, then ready.
    const order: ReplicaPhase[] = ["NoCapacity", "SystemError", "InProgress", "Ready"]
    live.sort((a, b) => order.indexOf(a.phase) - order.indexOf(b.phase))
    for (const r of live.slice(0, Math.max(0, live.length - desired))) this.stopReplica(r, d)
    for (let i = live.length; i < desired; i++)
      d.replicas.push({
        id: `${d.id}-${suffix(4)}-${suffix(5)}`,
        createdAt: this.ws.now(),
        phase: "NoCapacity",
        message: "",
        terminations: [],
      })
    for (const r of d.replicas) if (r.phase === "NoCapacity") this.startReplica(d, r)
  }

  private startReplica(d: Deployment, r: Replica): void {
    if (!this.ws.take(r)) {
      r.phase = "NoCapacity"
      r.message = "no capacity left in the node group for this replica"
      return
    }
    r.phase = "InProgress"
    r.message = "replica is starting"
    r.url = undefined
    r.startedAt = this.ws.now()
    const env = { ...this.ws.baseEnv(), ...this.ws.resolveEnvs(d.spec.envs) }
    const p = this.ws.runner.start([process.execPath, agentBin, "echo-server", "--port", "0"], env, repoRoot)
    r.process = p
    p.onStdout((text) => {
      const url = /listening on (http:\/\/\S+)/.exec(text)?.[1]
      if (url && !r.url && r.process === p) {
        r.url = url
        void this.waitHealthy(d, r, p)
      }
    })
    void p.exited.then((code) => this.replicaExited(d, r, p, code))
  }

  private async waitHealthy(d: Deployment, r: Replica, p: LocalProcess): Promise<void> {
    while (r.process === p && p.isAlive() && r.phase === "InProgress") {
      const ok = await fetch(`${r.url}/health`).then(
        (res) => res.status === 200,
        () => false,
      )
      if (ok && r.process === p && r.phase === "InProgress") {
        r.phase = "Ready"
        r.message = ""
        settle(d)
        return
      }
      await new Promise((resolve) => setTimeout(resolve, healthPollMs))
    }
  }

  private replicaExited(d: Deployment, r: Replica, p: LocalProcess, code: number): void {
    r.terminations.push({
      started_at: r.startedAt ?? 0,
      finished_at: this.ws.now(),
      exit_code: code,
      reason: code === 0 ? "Completed" : "Error",
      message: `process exited with code ${code}`,
    })
    if (r.process !== p) return
    r.process = undefined
    this.ws.release(r)
    if (r.phase === "Deleting") {
      d.replicas = d.replicas.filter((x) => x !== r)
      settle(d)
      return
    }
    if (this.options.restartReplicas && this.items.get(d.id) === d) this.startReplica(d, r)
    else {
      r.phase = "SystemError"
      r.message = `replica exited with code ${code}`
    }
  }

  private stopReplica(r: Replica, d?: Deployment): void {
    r.phase = "Deleting"
    r.message = "replica is being deleted"
    if (r.process) r.process.terminate()
    else {
      this.ws.release(r)
      if (d) d.replicas = d.replicas.filter((x) => x !== r)
    }
  }

  private view(d: Deployment): JsonObject {
    return { metadata: d.metadata, spec: d.spec, status: status(this.ws, d) }
  }
}

/** Where a deployment's spec places it (`resource_requirement.affinity`; a job's is `spec.affinity`). */
function affinityOf(spec: JsonObject): Json | undefined {
  const requirement = spec.resource_requirement
  return isObject(requirement) ? requirement.affinity : undefined
}

/** Once every desired replica is Ready and none is going away, scaling or an update has finished. */
function settle(d: Deployment): void {
  const desired = desiredReplicas(d.spec)
  if (d.replicas.length === desired && d.replicas.every((x) => x.phase === "Ready")) {
    d.everReady = true
    d.updating = false
  }
}

/** `LeptonDeploymentStatus`: the state, from the replicas, and the endpoint, always present. */
function status(ws: Workspace, d: Deployment): JsonObject {
  const desired = desiredReplicas(d.spec)
  const live = d.replicas.filter((r) => r.phase !== "Deleting")
  const ready = live.filter((r) => r.phase === "Ready").length
  const changing = live.length !== d.replicas.length
  let state: string
  if (desired === 0) state = changing ? "Stopping" : "Stopped"
  else if (live.some((r) => r.phase === "SystemError")) state = "Not Ready"
  else if (ready === desired && !changing) state = "Ready"
  else if (d.updating) state = "Updating"
  else state = d.everReady ? "Scaling" : "Starting"
  return {
    state,
    endpoint: {
      internal_endpoint: `http://${d.id}.${ws.id}.svc.cluster.local:8080`,
      external_endpoint: `${ws.origin}/endpoints/${ws.id}/${d.id}`,
      custom_external_endpoint: [],
    },
    container_port_status: [],
    autoscaler_status: {
      desired_replicas: desired,
      last_transition_time: Math.floor(Number(d.metadata.last_modified_at) / 1000),
      conditions: [],
    },
    is_system: false,
  }
}
