/**
 * The Kubernetes objects of an EKS swarm (serving.ts uses them), pure: each swarm incarnation is one
 * apps/v1 Deployment (its replicas) and one v1 Service (its endpoint) of the same deterministic name,
 * labelled for swarmplane and for the backend's Kueue LocalQueue; the merge patch of an update; and
 * the URL a Service answers at.
 *
 * An update's patch is computed against what swarmplane last applied (kept in an annotation, as
 * `kubectl apply` keeps its own), so the API server's defaults are never fought and a field swarmplane
 * dropped is cleared (`null`).
 *
 * The URL is the address the Service reports (`status.loadBalancer.ingress[0]`: the load balancer's
 * host name on EKS for `serviceType: LoadBalancer`); a ClusterIP Service reports none, and its URL is
 * its cluster DNS name, which only the cluster's pods (a job calling the swarm) can reach.
 */
import { createHash } from "node:crypto"
import type { Swarm } from "../../model/swarm"
import { DefaultRollout } from "../../model/swarm-fields"
import { BackendError } from "../../util/errors"
import {
  cpuQuantity,
  type EksConfig,
  Labels,
  labelValue,
  literalArgv,
  PriorityClassLabel,
  QueueLabel,
} from "./spec"
import type { Deployment, KubeObject, PodSpec, Service } from "./types"

/** The server of a swarm that names no image: vLLM's OpenAI-compatible one. */
export const DefaultServingImage = "vllm/vllm-openai:latest"
/** Pod names add `-<template hash>-<suffix>` (17 characters) to this, within a DNS label's 63. */
export const MaxServingNameLength = 46
/** What swarmplane last applied to an object, as JSON: the base of the next update's merge patch. */
export const LastAppliedAnnotation = "swarmplane.dev/last-applied"
/** The label that ties a swarm's pods to its Deployment and Service (their selector). */
export const ServingLabel = "swarmplane.dev/serving"
export const SwarmLabel = "swarmplane.dev/swarm"
/** After the drain, how long the server has to exit after SIGTERM before it is killed. */
export const ServerStopGraceS = 30
/** The Service's port: the URL needs none. */
export const ServicePort = 80

type EksServingSpec = Pick<Swarm, "name" | "createdAt">

const hash = (text: string, length: number) =>
  createHash("sha256").update(text).digest("hex").slice(0, length)

/**
 * The Deployment and Service of a swarm incarnation (a swarm deleted and made again gets new ones):
 * `sp-<swarm name>-<hash>`, a DNS-1035 label (a Service's name must be one).
 */
export function servingName(project: string, swarm: EksServingSpec): string {
  const tag = hash(`${project}/${swarm.name}/${swarm.createdAt}`, 8)
  const room = MaxServingNameLength - "sp-".length - tag.length - 1
  const middle = swarm.name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .slice(0, room)
    .replace(/^-+|-+$/g, "")
  return middle ? `sp-${middle}-${tag}` : `sp-${tag}`
}

/** The name a swarm's handle records, else the one its incarnation would have. */
export const servingNameOf = (project: string, swarm: Swarm): string => {
  const named = swarm.handle?.meta.deployment
  return typeof named === "string" ? named : servingName(project, swarm)
}

/** Memory as the API server writes it back (`4096Mi` is stored as `4Gi`), so a re-read compares equal. */
export const memoryQuantity = (mib: number) =>
  mib % (1024 * 1024) === 0 ? `${mib / (1024 * 1024)}Ti` : mib % 1024 === 0 ? `${mib / 1024}Gi` : `${mib}Mi`

/** The replica's server: the swarm's own command, the built-in echo server, or vLLM, on all interfaces. */
export function servingCommand(swarm: Pick<Swarm, "command" | "args" | "model">): string[] {
  if (swarm.command) return [...swarm.command, ...swarm.args]
  if (swarm.model === "echo") return ["swarmplane-agent", "echo-server", "--host", "0.0.0.0", ...swarm.args]
  return ["sh", "-c", 'exec vllm serve "$MODEL" --host 0.0.0.0 --port "$PORT" "$@"', "vllm", ...swarm.args]
}

export interface ServingInput {
  project: string
  backendId: string
  swarm: Swarm
  config: EksConfig
}

/** swarmplane's labels on the Deployment and the Service (not on the pods: the task pass lists those). */
function objectLabels({ project, backendId, swarm, config }: ServingInput): Record<string, string> {
  return {
    [Labels.project]: labelValue(project),
    [Labels.backend]: labelValue(backendId),
    [SwarmLabel]: labelValue(swarm.name),
    [QueueLabel]: config.localQueue,
    ...(config.workloadPriorityClass ? { [PriorityClassLabel]: config.workloadPriorityClass } : {}),
  }
}

/**
 * The Deployment of a swarm: `replicas` pods of one container whose port is named `http`, Ready once
 * the health path answers. Requests equal limits (Kueue counts quota on requests). Swarm environment
 * first, then `MODEL` and `PORT` (they win on a clash).
 *
 * The swarm's `rollout` is Kubernetes' own: a rolling update with its `maxSurge` and `maxUnavailable`
 * (a new pod takes traffic once Ready), and a pod being replaced or removed leaves the Service's
 * endpoints at once but is stopped only after `drainTimeoutS` (a `preStop` sleep), so the requests it
 * has finish and the load balancer stops sending it new ones first; the server then has
 * `ServerStopGraceS` to exit on its own.
 */
export function deploymentObject(input: ServingInput): Deployment {
  const { project, swarm, config } = input
  if (swarm.autoscaling)
    throw new BackendError(
      "eks backends do not autoscale swarms: give the swarm a fixed `replicas` instead of `autoscaling`",
      false,
    )
  const name = servingName(project, swarm)
  const rollout = swarm.rollout ?? DefaultRollout
  const quantities: Record<string, string> = {
    cpu: cpuQuantity(swarm.cpusPerReplica),
    memory: memoryQuantity(swarm.memoryMiBPerReplica),
    ...(swarm.gpusPerReplica > 0 ? { [config.gpuResourceName]: String(swarm.gpusPerReplica) } : {}),
  }
  const env = { ...swarm.env, MODEL: swarm.model, PORT: String(swarm.port) }
  const podLabels = { [ServingLabel]: name, [SwarmLabel]: labelValue(swarm.name) }
  const podSpec: PodSpec & { imagePullSecrets?: { name: string }[] } = {
    ...(config.serviceAccount ? { serviceAccountName: config.serviceAccount } : {}),
    ...(config.nodeSelector && Object.keys(config.nodeSelector).length
      ? { nodeSelector: { ...config.nodeSelector } }
      : {}),
    ...(config.tolerations.length ? { tolerations: config.tolerations.map((t) => ({ ...t })) } : {}),
    ...(config.imagePullSecrets.length
      ? { imagePullSecrets: config.imagePullSecrets.map((s) => ({ name: s })) }
      : {}),
    containers: [
      {
        name: "server",
        image: swarm.image ?? DefaultServingImage,
        command: literalArgv(servingCommand(swarm)),
        env: Object.entries(env).map(([k, value]) => ({ name: k, value })),
        ports: [{ name: "http", containerPort: swarm.port, protocol: "TCP" }],
        readinessProbe: { httpGet: { path: swarm.healthPath, port: "http" }, periodSeconds: 5 },
        lifecycle: { preStop: { sleep: { seconds: rollout.drainTimeoutS } } },
        resources: { requests: quantities, limits: { ...quantities } },
      },
    ],
    terminationGracePeriodSeconds: rollout.drainTimeoutS + ServerStopGraceS,
  }
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, namespace: config.namespace, labels: objectLabels(input) },
    spec: {
      replicas: swarm.replicas,
      selector: { matchLabels: { [ServingLabel]: name } },
      strategy: {
        type: "RollingUpdate",
        rollingUpdate: { maxSurge: rollout.maxSurge, maxUnavailable: rollout.maxUnavailable },
      },
      template: { metadata: { labels: podLabels }, spec: podSpec },
    },
  }
}

/** The Service in front of a swarm's Ready pods: port 80 to their `http` port, of the swarm's type. */
export function serviceObject(input: ServingInput): Service {
  const name = servingName(input.project, input.swarm)
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: input.config.namespace, labels: objectLabels(input) },
    spec: {
      type: input.swarm.serving.eks?.serviceType ?? "ClusterIP",
      selector: { [ServingLabel]: name },
      ports: [{ name: "http", port: ServicePort, targetPort: "http", protocol: "TCP" }],
    },
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The JSON merge patch (RFC 7396) from `before` to `after`: changed fields, objects field by field,
 * lists and values whole, and `null` for a field `after` dropped. `undefined` when nothing changed.
 */
export function mergePatchOf(before: unknown, after: unknown): unknown {
  if (!isObject(before) || !isObject(after))
    return JSON.stringify(before) === JSON.stringify(after) ? undefined : after
  const patch: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(after)) {
    const inner = key in before ? mergePatchOf(before[key], value) : value
    if (inner !== undefined) patch[key] = inner
  }
  for (const key of Object.keys(before)) if (!(key in after)) patch[key] = null
  return Object.keys(patch).length ? patch : undefined
}

/** What swarmplane manages of an object: its labels and spec (the rest is the API server's). */
const managed = (object: Deployment | Service) => ({ labels: object.metadata.labels, spec: object.spec })

/** The last-applied record an object carries, if it is readable. */
function lastApplied(object: KubeObject): unknown {
  const text = object.metadata.annotations?.[LastAppliedAnnotation]
  if (!text) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** `wanted` with its last-applied record: what is created. */
export function withRecord<T extends Deployment | Service>(wanted: T): T {
  const annotations = { [LastAppliedAnnotation]: JSON.stringify(managed(wanted)) }
  return { ...wanted, metadata: { ...wanted.metadata, annotations } }
}

/**
 * The merge patch that brings `current` to `wanted`, against what swarmplane last applied (or, for an
 * object without that record, everything swarmplane sets); `undefined` when nothing differs.
 */
export function updatePatch(
  current: KubeObject,
  wanted: Deployment | Service,
): Record<string, unknown> | undefined {
  const base = lastApplied(current)
  const next = managed(wanted)
  const diff = (base === undefined ? next : mergePatchOf(base, next)) as
    | { labels?: unknown; spec?: unknown }
    | undefined
  if (!diff) return undefined
  return {
    metadata: {
      ...(diff.labels !== undefined ? { labels: diff.labels } : {}),
      annotations: { [LastAppliedAnnotation]: JSON.stringify(next) },
    },
    ...(diff.spec !== undefined ? { spec: diff.spec } : {}),
  }
}

/** Where a Service answers: the address it reports, else (ClusterIP) its cluster DNS name. */
export interface Endpoint {
  url: string
  /** The Service reports this address (a load balancer's): the control plane can reach it. */
  reported: boolean
}

/**
 * The Service's endpoint: `http://<ingress hostname or ip>[:<port>]` when the Service reports an address
 * (its port that of the ingress' port status when given, else the Service's), else for a ClusterIP
 * Service `http://<name>.<namespace>.svc.cluster.local`; `undefined` for a load balancer not yet made.
 */
export function endpointOf(service: Service, namespace: string): Endpoint | undefined {
  const ingress = service.status?.loadBalancer?.ingress?.[0] as
    | { ip?: string; hostname?: string; ports?: { port?: number }[] }
    | undefined
  const port = ingress?.ports?.[0]?.port ?? service.spec?.ports[0]?.port ?? ServicePort
  const suffix = port === 80 ? "" : `:${port}`
  const host = ingress?.hostname || (ingress?.ip?.includes(":") ? `[${ingress.ip}]` : ingress?.ip)
  if (host) return { url: `http://${host}${suffix}`, reported: true }
  if (service.spec?.type === "LoadBalancer") return undefined
  return { url: `http://${service.metadata.name}.${namespace}.svc.cluster.local${suffix}`, reported: false }
}
