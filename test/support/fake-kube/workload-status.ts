/**
 * Reading and writing Kueue objects' status for the fake: metav1.Conditions (set keeping
 * lastTransitionTime while the status holds), admission, priority, and status writes that skip
 * unchanged objects (so the controllers settle).
 */
import { asArray, asObject, isObject, type Json, type JsonObject } from "./resources"
import { meta, type Store } from "./store"

export const priority = (wl: JsonObject) => Number(asObject(wl.spec).priority ?? 0)

export function findCondition(o: JsonObject, type: string): JsonObject | undefined {
  return asArray(asObject(o.status).conditions)
    .map(asObject)
    .find((c) => c.type === type)
}

export const hasCondition = (o: JsonObject, type: string) => findCondition(o, type)?.status === "True"
export const isAdmitted = (wl: JsonObject) =>
  hasCondition(wl, "QuotaReserved") && isObject(asObject(wl.status).admission)

/** Set a metav1.Condition (no lastProbeTime), keeping lastTransitionTime when the status does not change. */
export function setCondition(
  o: JsonObject,
  now: string,
  type: string,
  status: string,
  reason: string,
  message: string,
): void {
  const s = asObject(o.status)
  const conditions = asArray(s.conditions).map(asObject)
  const existing = conditions.find((c) => c.type === type)
  const generation = Number(meta(o).generation ?? 1)
  const next: JsonObject = {
    type,
    status,
    reason,
    message,
    lastTransitionTime: now,
    observedGeneration: generation,
  }
  if (existing) {
    if (existing.status === status) next.lastTransitionTime = existing.lastTransitionTime ?? now
    Object.assign(existing, next)
  } else conditions.push(next)
  s.conditions = conditions
  o.status = s
}

export function writeStatus(store: Store, o: JsonObject, status: JsonObject): void {
  if (JSON.stringify(o.status ?? null) === JSON.stringify(status)) return
  o.status = status as Json
  store.touch(o)
}
