/**
 * The fake cluster's kubelet: every pod in the store runs for real, each container's `command` +
 * `args` as a local process (`../local-processes.ts`) with the container's env, the
 * downward env (`HOSTNAME`, `fieldRef`s) and `$(VAR)` expansion, on 127.0.0.1. Declared container
 * ports are remapped to free loopback ports (passed as `PORT`, recorded in the pod's annotation
 * `fake-kube.swarmplane.dev/ports`), since every pod shares one host. It reports pod phases and
 * `containerStatuses` as D.1 shows: ContainerCreating, Running (Ready once the readiness probe
 * answers), terminated Completed/Error/OOMKilled, ErrImagePull/ImagePullBackOff for scripted images,
 * restarts (CrashLoopBackOff) for `restartPolicy` Always/OnFailure.
 */

import { resolveArgv } from "../../../packages/agent/src/process-runner"
import type { LocalProcess, ProcessRunner } from "../local-processes"
import { containerEnv } from "./container-env"
import { canConnect, freePort } from "./ports"
import {
  asArray,
  asObject,
  condition,
  isObject,
  type Json,
  type JsonObject,
  KubeError,
  Types,
} from "./resources"
import { meta, nameOf, namespaceOf, type Store } from "./store"

const repoRoot = new URL("../../../", import.meta.url).pathname
export const PortsAnnotation = "fake-kube.swarmplane.dev/ports"
const probeEveryMs = 100
const restartDelayMs = 300
const imageBackOffMs = 500

/** How the next matching container ends, instead of how its process ends. */
export interface ScriptedTermination {
  /** A pod name prefix (e.g. the Job's name). */
  podPrefix: string
  reason: "OOMKilled" | "Error"
  exitCode?: number
}

interface Container {
  name: string
  process?: LocalProcess
  /** Every run of this container, oldest first: the log is the newest one's, `previous` the one before. */
  runs: LocalProcess[]
  state: JsonObject
  lastState: JsonObject
  restartCount: number
  ready: boolean
  started: boolean
  ports: Map<string, number>
}

interface Runtime {
  uid: string
  namespace: string
  name: string
  containers: Container[]
  gone: boolean
  /** Being deleted gracefully (its preStop, then SIGTERM, then SIGKILL after the grace). */
  stopping?: boolean
}

export class Kubelet {
  readonly runtimes = new Map<string, Runtime>()
  /** Images whose pull fails (exact names). */
  readonly badImages = new Set<string>()
  readonly terminations: ScriptedTermination[] = []

  constructor(
    private readonly store: Store,
    private readonly runner: ProcessRunner,
  ) {}

  sync(): void {
    const pods = this.store.all(Types.pods)
    const live = new Set(pods.map((p) => String(meta(p).uid)))
    for (const rt of this.runtimes.values())
      if (!live.has(rt.uid)) {
        rt.gone = true
        for (const c of rt.containers) c.process?.terminate(2_000)
        this.runtimes.delete(rt.uid)
      }
    for (const pod of pods) {
      const uid = String(meta(pod).uid)
      if (meta(pod).deletionTimestamp) {
        this.stopGracefully(pod)
        continue
      }
      const phase = asObject(pod.status).phase
      if (!this.runtimes.has(uid) && phase !== "Succeeded" && phase !== "Failed") void this.start(pod)
    }
  }

  /**
   * A pod deleted gracefully (`deletionTimestamp`): as the kubelet does, its containers' `preStop`
   * sleep first (the pod keeps running and answering what it was sent), then SIGTERM, SIGKILL after
   * the rest of `terminationGracePeriodSeconds`; the pod leaves the store once its processes ended.
   */
  private stopGracefully(pod: JsonObject): void {
    const rt = this.runtimes.get(String(meta(pod).uid))
    const remove = () => this.store.remove(Types.pods, namespaceOf(pod), nameOf(pod))
    if (!rt) {
      remove()
      return
    }
    if (rt.stopping) return
    rt.stopping = true
    const spec = asObject(pod.spec)
    const grace = Number(meta(pod).deletionGracePeriodSeconds ?? spec.terminationGracePeriodSeconds ?? 30)
    const preStop = Math.max(
      0,
      ...asArray(spec.containers).map((c) =>
        Number(asObject(asObject(asObject(asObject(c).lifecycle).preStop).sleep).seconds ?? 0),
      ),
    )
    setTimeout(() => {
      rt.gone = true
      const running = rt.containers.flatMap((c) => (c.process ? [c.process] : []))
      for (const p of running) p.terminate(Math.max(0, grace - preStop) * 1000)
      void Promise.all(running.map((p) => p.exited)).then(() => {
        this.runtimes.delete(rt.uid)
        remove()
      })
    }, Math.min(preStop, grace) * 1000).unref()
  }

  /** Stop reporting and restarting (the fake is stopping; the runner kills the processes). */
  stopAll(): void {
    for (const rt of this.runtimes.values()) rt.gone = true
    this.runtimes.clear()
  }

  /** The pod's local port for a container port (number or name), once it has one. */
  localPort(pod: JsonObject, port: Json | undefined): number | undefined {
    const map = asObject(JSON.parse(String(asObject(meta(pod).annotations)[PortsAnnotation] ?? "{}")) as Json)
    const v = map[String(port)]
    return typeof v === "number" ? v : undefined
  }

  log(namespace: string, name: string, container: string | undefined, previous = false): string {
    const pod = this.store.get(Types.pods, namespace, name)
    const names = asArray(asObject(pod.spec).containers).map((c) => String(asObject(c).name))
    if (container === undefined && names.length > 1)
      throw new KubeError(
        400,
        "BadRequest",
        `a container name must be specified for pod ${name}, choose one of: [${names.join(" ")}]`,
      )
    const cname = container ?? names[0] ?? ""
    if (!names.includes(cname))
      throw new KubeError(400, "BadRequest", `container ${cname} is not valid for pod ${name}`)
    const rt = this.runtimes.get(String(meta(pod).uid))
    const c = rt?.containers.find((x) => x.name === cname)
    if (!c || (!c.started && c.restartCount === 0)) {
      const waiting = asObject(asObject(c?.state ?? { waiting: { reason: "ContainerCreating" } }).waiting)
      throw new KubeError(
        400,
        "BadRequest",
        `container "${cname}" in pod "${name}" is waiting to start: ${String(waiting.reason ?? "ContainerCreating")}`,
      )
    }
    if (previous) {
      const before = c.runs.at(-2)
      if (!before)
        throw new KubeError(
          400,
          "BadRequest",
          `previous terminated container "${cname}" in pod "${name}" not found`,
        )
      return before.log()
    }
    return c.runs.at(-1)?.log() ?? ""
  }

  private async start(pod: JsonObject): Promise<void> {
    const m = meta(pod)
    const spec = asObject(pod.spec)
    const rt: Runtime = {
      uid: String(m.uid),
      namespace: namespaceOf(pod),
      name: nameOf(pod),
      containers: asArray(spec.containers).map((c) => ({
        name: String(asObject(c).name),
        runs: [],
        state: { waiting: { reason: "ContainerCreating" } },
        lastState: {},
        restartCount: 0,
        ready: false,
        started: false,
        ports: new Map(),
      })),
      gone: false,
    }
    this.runtimes.set(rt.uid, rt)
    // Remap declared ports (and probe ports) to free loopback ports.
    const mapping: Record<string, number> = {}
    for (const [i, raw] of asArray(spec.containers).entries()) {
      const c = asObject(raw)
      const rc = rt.containers[i]
      if (!rc) continue
      for (const p of asArray(c.ports)) {
        const port = asObject(p)
        const local = await freePort()
        rc.ports.set(String(port.containerPort), local)
        mapping[String(port.containerPort)] = local
        if (typeof port.name === "string") mapping[port.name] = local
      }
    }
    if (rt.gone) return
    const annotations = asObject(m.annotations)
    annotations[PortsAnnotation] = JSON.stringify(mapping)
    m.annotations = annotations
    pod.status = {
      phase: "Pending",
      conditions: [
        condition("PodScheduled", "True", this.store.timestamp()),
        condition("Initialized", "True", this.store.timestamp()),
      ],
      hostIP: "127.0.0.1",
      podIP: "127.0.0.1",
      podIPs: [{ ip: "127.0.0.1" }],
      qosClass: "Burstable",
      startTime: this.store.timestamp(),
    }
    this.report(pod, rt)
    for (const [i, raw] of asArray(spec.containers).entries()) {
      const rc = rt.containers[i]
      if (rc) this.run(pod, rt, asObject(raw), rc)
    }
  }

  private run(pod: JsonObject, rt: Runtime, c: JsonObject, rc: Container): void {
    const image = String(c.image ?? "")
    if (this.badImages.has(image)) {
      rc.state = {
        waiting: { reason: "ErrImagePull", message: `failed to pull and unpack image "${image}": not found` },
      }
      this.report(pod, rt)
      setTimeout(() => {
        if (rt.gone) return
        rc.state = { waiting: { reason: "ImagePullBackOff", message: `Back-off pulling image "${image}"` } }
        this.report(pod, rt)
      }, imageBackOffMs).unref()
      return
    }
    const env = containerEnv(pod, c, rc.ports.values().next().value)
    const expand = (s: Json) =>
      String(s).replace(/\$\((\w+)\)|\$\$/g, (all, v) => (all === "$$" ? "$" : (env[v] ?? all)))
    const argv = [...asArray(c.command), ...asArray(c.args)].map(expand)
    const startedAt = this.store.timestamp()
    if (argv.length === 0) {
      this.terminated(pod, rt, rc, {
        exitCode: 128,
        reason: "StartError",
        message: "the fake runs a container's command and args; this one has neither",
        startedAt,
      })
      return
    }
    const p = this.runner.start(
      resolveArgv(argv),
      env,
      typeof c.workingDir === "string" ? c.workingDir : repoRoot,
    )
    rc.process = p
    rc.runs.push(p)
    rc.started = true
    rc.state = { running: { startedAt } }
    const probe = asObject(c.readinessProbe)
    rc.ready = Object.keys(probe).length === 0
    this.report(pod, rt)
    if (!rc.ready) void this.probe(pod, rt, rc, p, probe)
    const scripted = this.terminations.findIndex((s) => rt.name.startsWith(s.podPrefix))
    const script = this.terminations[scripted]
    if (script) {
      this.terminations.splice(scripted, 1)
      setTimeout(() => p.kill("SIGKILL"), 50).unref()
    }
    void p.exited.then((code) => {
      if (rt.gone || rc.process !== p) return
      rc.process = undefined
      const exitCode = script ? (script.exitCode ?? (script.reason === "OOMKilled" ? 137 : 1)) : code
      const reason = script ? script.reason : code === 0 ? "Completed" : "Error"
      this.terminated(pod, rt, rc, { exitCode, reason, startedAt })
      const policy = String(asObject(pod.spec).restartPolicy ?? "Always")
      if (policy === "Always" || (policy === "OnFailure" && exitCode !== 0)) {
        rc.lastState = rc.state
        rc.state = {
          waiting: { reason: "CrashLoopBackOff", message: `back-off restarting failed container ${rc.name}` },
        }
        this.report(pod, rt)
        setTimeout(() => {
          if (rt.gone) return
          rc.restartCount += 1
          this.run(pod, rt, c, rc)
        }, restartDelayMs).unref()
      }
    })
  }

  private terminated(
    pod: JsonObject,
    rt: Runtime,
    rc: Container,
    t: { exitCode: number; reason: string; startedAt: string; message?: string },
  ): void {
    rc.ready = false
    rc.state = {
      terminated: {
        exitCode: t.exitCode,
        reason: t.reason,
        ...(t.message ? { message: t.message } : {}),
        startedAt: t.startedAt,
        finishedAt: this.store.timestamp(),
        containerID: `containerd://${rt.uid}-${rc.name}-${rc.restartCount}`,
      },
    }
    this.report(pod, rt)
  }

  private async probe(
    pod: JsonObject,
    rt: Runtime,
    rc: Container,
    p: LocalProcess,
    probe: JsonObject,
  ): Promise<void> {
    const http = asObject(probe.httpGet)
    const tcp = asObject(probe.tcpSocket)
    const port = this.localPort(pod, (http.port ?? tcp.port) as Json) ?? rc.ports.values().next().value
    while (!rt.gone && rc.process === p && p.isAlive()) {
      let ok = false
      if (port !== undefined && Object.keys(http).length > 0)
        ok = await fetch(`http://127.0.0.1:${port}${String(http.path ?? "/")}`).then(
          (r) => r.status >= 200 && r.status < 400,
          () => false,
        )
      else if (port !== undefined) ok = await canConnect(port)
      else ok = true // an exec probe: the fake counts a running container as ready
      if (ok && !rt.gone && rc.process === p) {
        rc.ready = true
        this.report(pod, rt)
        return
      }
      await new Promise((resolve) => setTimeout(resolve, probeEveryMs))
    }
  }

  /** Write the pod's status from its containers (if the pod still exists). */
  private report(pod: JsonObject, rt: Runtime): void {
    if (rt.gone || !this.store.find(Types.pods, rt.namespace, rt.name)) return
    const spec = asObject(pod.spec)
    const status = asObject(pod.status)
    const states = rt.containers.map((c) => c.state)
    const terminated = states.map((s) => asObject(s.terminated))
    const allTerminated = states.every((s) => isObject(s.terminated))
    const policy = String(spec.restartPolicy ?? "Always")
    const restarts =
      policy === "Always" || (policy === "OnFailure" && terminated.some((t) => t.exitCode !== 0))
    let phase = "Pending"
    if (allTerminated && !restarts) phase = terminated.every((t) => t.exitCode === 0) ? "Succeeded" : "Failed"
    else if (rt.containers.some((c) => c.started)) phase = "Running"
    const images = new Map(
      asArray(spec.containers).map((c) => [String(asObject(c).name), String(asObject(c).image ?? "")]),
    )
    const allReady = phase === "Running" && rt.containers.every((c) => c.ready)
    const now = this.store.timestamp()
    const conditions = asArray(status.conditions).filter(
      (c) => !["ContainersReady", "Ready"].includes(String(asObject(c).type)),
    )
    const previous = asArray(status.conditions).find((c) => asObject(c).type === "Ready")
    const readyTime =
      asObject(previous).status === (allReady ? "True" : "False")
        ? String(asObject(previous).lastTransitionTime)
        : now
    conditions.push(
      condition("ContainersReady", allReady ? "True" : "False", readyTime),
      condition("Ready", allReady ? "True" : "False", readyTime),
    )
    pod.status = {
      ...status,
      phase,
      conditions,
      containerStatuses: rt.containers.map((c) => ({
        name: c.name,
        ready: c.ready,
        started: isObject(c.state.running),
        restartCount: c.restartCount,
        image: images.get(c.name) ?? "",
        imageID: c.started ? `${images.get(c.name)}@sha256:fake` : "",
        containerID: c.started ? `containerd://${rt.uid}-${c.name}-${c.restartCount}` : null,
        state: c.state,
        lastState: c.lastState,
      })),
    }
    this.store.touch(pod)
  }
}
