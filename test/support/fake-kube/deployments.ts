/**
 * The fake cluster's Deployment controller and Services. A Deployment's pods (named
 * `<deployment>-<template hash>-<suffix>`, labelled `pod-template-hash`, owned by the Deployment
 * directly: the fake keeps no ReplicaSets) run its container through the kubelet; a template change
 * rolls them as its `RollingUpdate` strategy says (at most `maxSurge` pods beyond `replicas`, at
 * least `replicas - maxUnavailable` Ready; a percentage of `replicas`, the surge rounded up and the
 * unavailable down), or `Recreate` (every old pod gone before a new one). A pod the controller
 * removes is deleted gracefully: it gets a `deletionTimestamp` (Services stop sending it requests at
 * once) and the kubelet stops it after its `preStop` sleep and grace; terminating pods are not
 * counted. `status` counts replicas as apps/v1 does. Each Service with a selector gets a loopback HTTP listener that forwards to the
 * Ready pods it selects (round-robin, to the pod's local port for the Service's `targetPort`; a pod
 * that started terminating still gets requests for `endpointLagMs`, as kube-proxy and load balancers
 * learn of it late, which is what a `preStop` sleep is for); its
 * URL is in `status.loadBalancer.ingress[0]` (ip 127.0.0.1 and the port) and in the annotation
 * `fake-kube.swarmplane.dev/url`, as a real LoadBalancer Service's address would be.
 */
import { createHash } from "node:crypto"
import { createServer, request as httpRequest, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import type { Kubelet } from "./kubelet"
import { asArray, asObject, condition, type JsonObject, Types } from "./resources"
import { labelsOf, meta, nameOf, namespaceOf, randomSuffix, type Store } from "./store"

export const ServiceUrlAnnotation = "fake-kube.swarmplane.dev/url"

const isReady = (p: JsonObject) =>
  asArray(asObject(p.status).conditions).some(
    (c) => asObject(c).type === "Ready" && asObject(c).status === "True",
  )

export function templateHash(template: JsonObject): string {
  const alphabet = "bcdfghjklmnpqrstvwxz2456789"
  const digest = createHash("sha256").update(JSON.stringify(template)).digest()
  return [...digest.subarray(0, 10)].map((b) => alphabet[b % alphabet.length]).join("")
}

export class DeploymentController {
  constructor(private readonly store: Store) {}

  sync(): void {
    for (const d of this.store.all(Types.deployments)) this.syncDeployment(d)
  }

  private syncDeployment(d: JsonObject): void {
    const spec = asObject(d.spec)
    const template = asObject(spec.template)
    const hash = templateHash(template)
    const uid = String(meta(d).uid)
    const owned = () =>
      this.store
        .all(Types.pods, namespaceOf(d))
        .filter((p) => asArray(meta(p).ownerReferences).some((r) => asObject(r).uid === uid))
    const desired = Number(spec.replicas ?? 1)
    const remove = (p: JsonObject) => this.store.remove(Types.pods, namespaceOf(p), nameOf(p))
    // A pod that ended (restartPolicy Never) is replaced.
    for (const p of owned().filter((x) => ["Succeeded", "Failed"].includes(String(asObject(x.status).phase))))
      remove(p)
    const pods = owned()
    const live = pods.filter((p) => !meta(p).deletionTimestamp)
    const current = live.filter((p) => labelsOf(p)["pod-template-hash"] === hash)
    const old = live.filter((p) => labelsOf(p)["pod-template-hash"] !== hash)
    const strategy = asObject(spec.strategy)
    const rolling = asObject(strategy.rollingUpdate)
    const bound = (v: unknown, round: (n: number) => number) =>
      typeof v === "string" && v.endsWith("%")
        ? round((Number(v.slice(0, -1)) / 100) * desired)
        : Number(v ?? 0)
    const surge = bound(rolling.maxSurge ?? "25%", Math.ceil)
    const unavailable = bound(rolling.maxUnavailable ?? "25%", Math.floor)
    const notReadyFirst = (list: JsonObject[]) =>
      [...list].sort((a, b) => Number(isReady(a)) - Number(isReady(b)))

    if (strategy.type === "Recreate") {
      for (const p of old) this.retire(p)
      // New pods only once every old one is gone, terminating ones too.
      if (pods.some((p) => labelsOf(p)["pod-template-hash"] !== hash)) {
        this.report(d, hash, uid)
        return
      }
    }
    if (old.length === 0) {
      // Not rolling: scale to `replicas` (not-Ready pods go first).
      for (let i = current.length; i < desired; i++) this.createPod(d, template, hash)
      for (const p of notReadyFirst(current).slice(0, Math.max(0, current.length - desired))) this.retire(p)
    } else {
      // Rolling: new pods up to `replicas + maxSurge` in all; old ones go while enough stay Ready.
      const room = desired + surge - live.length
      const create = Math.max(0, Math.min(desired - current.length, room))
      for (let i = 0; i < create; i++) this.createPod(d, template, hash)
      let ready = live.filter(isReady).length
      const minReady = desired - unavailable
      const extra = Math.max(0, current.length + create + old.length - desired)
      let removed = 0
      for (const p of notReadyFirst(old)) {
        if (removed >= extra && isReady(p)) break
        if (isReady(p)) {
          if (ready - 1 < minReady) break
          ready--
        }
        this.retire(p)
        removed++
      }
    }
    this.report(d, hash, uid)
  }

  /** Delete a pod gracefully: Services drop it now; the kubelet stops it after its preStop and grace. */
  private retire(p: JsonObject): void {
    const m = meta(p)
    if (m.deletionTimestamp) return
    m.deletionTimestamp = this.store.timestamp()
    m.deletionGracePeriodSeconds = Number(asObject(p.spec).terminationGracePeriodSeconds ?? 30)
    this.store.touch(p)
  }

  private report(d: JsonObject, hash: string, uid: string): void {
    const spec = asObject(d.spec)
    const desired = Number(spec.replicas ?? 1)
    const after = this.store
      .all(Types.pods, namespaceOf(d))
      .filter((p) => asArray(meta(p).ownerReferences).some((r) => asObject(r).uid === uid))
      .filter((p) => !meta(p).deletionTimestamp)
    const ready = after.filter(isReady).length
    const updated = after.filter((p) => labelsOf(p)["pod-template-hash"] === hash).length
    const now = this.store.timestamp()
    const previous = asObject(d.status)
    const cond = (type: string, status: string, reason: string, message: string) => {
      const old = asArray(previous.conditions)
        .map(asObject)
        .find((c) => c.type === type)
      const c = condition(
        type,
        status,
        old?.status === status ? String(old.lastTransitionTime) : now,
        reason,
        message,
      )
      delete c.lastProbeTime
      c.lastUpdateTime =
        old?.status === status && old.reason === reason ? String(old.lastUpdateTime ?? now) : now
      return c
    }
    const complete = updated === desired && ready >= desired && after.length === desired
    const status: JsonObject = {
      observedGeneration: Number(meta(d).generation ?? 1),
      replicas: after.length,
      updatedReplicas: updated,
      readyReplicas: ready,
      availableReplicas: ready,
      unavailableReplicas: Math.max(0, desired - ready),
      conditions: [
        ready >= desired
          ? cond("Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability.")
          : cond(
              "Available",
              "False",
              "MinimumReplicasUnavailable",
              "Deployment does not have minimum availability.",
            ),
        complete
          ? cond(
              "Progressing",
              "True",
              "NewReplicaSetAvailable",
              `ReplicaSet "${nameOf(d)}-${hash}" has successfully progressed.`,
            )
          : cond(
              "Progressing",
              "True",
              "ReplicaSetUpdated",
              `ReplicaSet "${nameOf(d)}-${hash}" is progressing.`,
            ),
      ],
    }
    for (const k of [
      "readyReplicas",
      "availableReplicas",
      "unavailableReplicas",
      "updatedReplicas",
      "replicas",
    ])
      if (status[k] === 0) delete status[k]
    if (JSON.stringify(status) !== JSON.stringify(d.status ?? null)) {
      d.status = status
      this.store.touch(d)
    }
  }

  private createPod(d: JsonObject, template: JsonObject, hash: string): void {
    const t = structuredClone(template)
    const tm = asObject(t.metadata)
    this.store.create(Types.pods, namespaceOf(d), {
      metadata: {
        name: `${nameOf(d)}-${hash}-${randomSuffix()}`,
        labels: { ...asObject(tm.labels), "pod-template-hash": hash },
        annotations: asObject(tm.annotations),
        ownerReferences: [
          {
            apiVersion: "apps/v1",
            kind: "Deployment",
            name: nameOf(d),
            uid: String(meta(d).uid),
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
      spec: { restartPolicy: "Always", ...asObject(t.spec), nodeName: "fake-node" },
    })
  }
}

interface Listener {
  server: Server
  port: number
  next: number
}

/** A loopback listener per Service, forwarding to its Ready pods. */
export class Services {
  private readonly listeners = new Map<string, Listener>()
  private pending = new Set<string>()

  /** Pods seen terminating, by uid: when (the Service keeps them for `endpointLagMs`). */
  private readonly terminatingSince = new Map<string, number>()

  constructor(
    private readonly store: Store,
    private readonly kubelet: Kubelet,
    private readonly endpointLagMs = 1_000,
  ) {}

  sync(): void {
    // When each pod was first seen terminating: the lag counts from then.
    for (const p of this.store.all(Types.pods)) if (meta(p).deletionTimestamp) this.inEndpoints(p)
    const services = this.store.all(Types.services)
    const uids = new Set(services.map((s) => String(meta(s).uid)))
    for (const [uid, l] of this.listeners)
      if (!uids.has(uid)) {
        l.server.close()
        l.server.closeAllConnections()
        this.listeners.delete(uid)
      }
    for (const svc of services) {
      const uid = String(meta(svc).uid)
      const l = this.listeners.get(uid)
      if (l) this.publish(svc, l.port)
      else if (!this.pending.has(uid)) void this.listen(svc, uid)
    }
  }

  url(namespace: string, name: string): string | undefined {
    const svc = this.store.find(Types.services, namespace, name)
    const l = svc ? this.listeners.get(String(meta(svc).uid)) : undefined
    return l ? `http://127.0.0.1:${l.port}` : undefined
  }

  closeAll(): void {
    for (const l of this.listeners.values()) {
      l.server.close()
      l.server.closeAllConnections()
    }
    this.listeners.clear()
  }

  private async listen(svc: JsonObject, uid: string): Promise<void> {
    this.pending.add(uid)
    const namespace = namespaceOf(svc)
    const name = nameOf(svc)
    const server = createServer((req, res) => {
      const current = this.store.find(Types.services, namespace, name)
      const target = current ? this.pick(current) : undefined
      if (!target) {
        res.writeHead(503, { "content-type": "text/plain" }).end("no ready endpoints for this service\n")
        return
      }
      const upstream = httpRequest(
        { host: "127.0.0.1", port: target, method: req.method, path: req.url, headers: req.headers },
        (up) => {
          res.writeHead(up.statusCode ?? 502, up.headers)
          up.pipe(res)
        },
      )
      upstream.once("error", () => {
        if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" })
        res.end("upstream pod did not answer\n")
      })
      req.pipe(upstream)
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as AddressInfo).port
    this.pending.delete(uid)
    if (!this.store.find(Types.services, namespace, name)) {
      server.close()
      return
    }
    this.listeners.set(uid, { server, port, next: 0 })
    this.publish(svc, port)
  }

  /** The local port of the next Ready pod the Service selects (round-robin). */
  private pick(svc: JsonObject): number | undefined {
    const spec = asObject(svc.spec)
    const selector = asObject(spec.selector) as Record<string, string>
    if (Object.keys(selector).length === 0) return undefined
    const targetPort = asObject(asArray(spec.ports)[0]).targetPort ?? asObject(asArray(spec.ports)[0]).port
    const ports = this.store
      .all(Types.pods, namespaceOf(svc))
      .filter((p) => isReady(p) && this.inEndpoints(p))
      .filter((p) => Object.entries(selector).every(([k, v]) => labelsOf(p)[k] === v))
      .flatMap((p) => {
        const port = this.kubelet.localPort(p, targetPort ?? null)
        return port === undefined ? [] : [port]
      })
    const l = this.listeners.get(String(meta(svc).uid))
    if (!l || ports.length === 0) return undefined
    return ports[l.next++ % ports.length]
  }

  /** A pod is in the endpoints until `endpointLagMs` after it started terminating. */
  private inEndpoints(p: JsonObject): boolean {
    if (!meta(p).deletionTimestamp) return true
    const uid = String(meta(p).uid)
    const now = Date.now()
    if (!this.terminatingSince.has(uid)) {
      if (this.terminatingSince.size > 10_000) this.terminatingSince.clear()
      this.terminatingSince.set(uid, now)
    }
    return now - this.terminatingSince.get(uid)! < this.endpointLagMs
  }

  private publish(svc: JsonObject, port: number): void {
    const url = `http://127.0.0.1:${port}`
    const m = meta(svc)
    const annotations = asObject(m.annotations)
    const ingress = [{ ip: "127.0.0.1", ports: [{ port, protocol: "TCP" }] }]
    if (annotations[ServiceUrlAnnotation] === url) return
    annotations[ServiceUrlAnnotation] = url
    m.annotations = annotations
    svc.status = { loadBalancer: { ingress } }
    this.store.touch(svc)
  }
}
