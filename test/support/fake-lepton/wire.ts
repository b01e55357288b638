/**
 * The fake Lepton's pure helpers of the wire types: checking a deployment's spec, what of it a replica
 * depends on, its desired replica count, and the `Replica` object both deployments and jobs list.
 */
import { invalid, isObject, type Json, type JsonObject, metadata } from "./state"

/** The part of a spec a running replica depends on; scaling and api tokens are not in it. */
export function replicaSpec(spec: JsonObject): string {
  const { resource_requirement, api_tokens, auto_scaler, ...rest } = spec
  const rr = isObject(resource_requirement) ? resource_requirement : {}
  const { min_replicas, max_replicas, ...shape } = rr
  return JSON.stringify({ ...rest, shape })
}

export function desiredReplicas(spec: JsonObject): number {
  const rr = isObject(spec.resource_requirement) ? spec.resource_requirement : {}
  return typeof rr.min_replicas === "number" ? rr.min_replicas : 1
}

export function checkSpec(spec: Json | undefined): JsonObject {
  if (!isObject(spec)) throw invalid("spec: required")
  const rr = spec.resource_requirement
  if (rr !== undefined && !isObject(rr)) throw invalid("spec.resource_requirement: must be an object")
  const min = rr?.min_replicas
  const max = rr?.max_replicas
  if (min !== undefined && (typeof min !== "number" || !Number.isInteger(min) || min < 0))
    throw invalid("spec.resource_requirement.min_replicas: must be an integer >= 0")
  if (max !== undefined && (typeof max !== "number" || max < (typeof min === "number" ? min : 1)))
    throw invalid("spec.resource_requirement.max_replicas: must be >= min_replicas")
  return spec
}

export function stringLabels(meta: JsonObject): JsonObject {
  return isObject(meta.labels) ? { labels: meta.labels } : {}
}

/** Lepton's `Replica`: every replica of the fake runs on this machine. */
export function replicaView(id: string, nowMs: number): JsonObject {
  return {
    metadata: metadata(id, id, nowMs),
    id,
    status: { public_ip: "127.0.0.1", node: { name: "fake-node-1", id: "fake-node-1" }, domains: [] },
  }
}
