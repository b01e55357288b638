/**
 * Kueue's queue status for the fake (C.4): per ClusterQueue and LocalQueue, the pending, reserving
 * and admitted Workload counts and the usage per flavor and resource (`flavorsUsage` on a
 * ClusterQueue, `flavorUsage` on a LocalQueue, as v1beta1 spells them), plus the Active condition.
 */
import type { Usage } from "./quota"
import { asArray, asObject, formatQuantity, type JsonObject, Types } from "./resources"
import { meta, nameOf, namespaceOf, type Store } from "./store"
import { hasCondition, isAdmitted, writeStatus } from "./workload-status"

/** 4. Status of every ClusterQueue and LocalQueue (C.4), written only when it changed. */
export function writeQueueStatus(
  store: Store,
  usageOf: (admitted: JsonObject[]) => Usage,
  clusterQueueOf: (wl: JsonObject) => string | undefined,
): void {
  const workloads = store.all(Types.workloads).filter((w) => !hasCondition(w, "Finished"))
  const summarize = (list: JsonObject[], cq: JsonObject, usageKey: string, borrowed: boolean): JsonObject => {
    const admitted = list.filter(isAdmitted)
    const usage = usageOf(admitted)
    const flavors = asArray(asObject(cq.spec).resourceGroups).flatMap((g) =>
      asArray(asObject(g).flavors).map(asObject),
    )
    const report = flavors.map((f) => ({
      name: String(f.name),
      resources: asArray(f.resources).map((r) => {
        const name = String(asObject(r).name)
        const out: JsonObject = { name, total: formatQuantity(usage.get(String(f.name))?.get(name) ?? 0) }
        if (borrowed) out.borrowed = "0"
        return out
      }),
    }))
    return {
      pendingWorkloads: list.length - admitted.length,
      reservingWorkloads: admitted.length,
      admittedWorkloads: admitted.length,
      flavorsReservation: report,
      [usageKey]: report,
    }
  }
  for (const cq of store.all(Types.clusterqueues)) {
    const mine = workloads.filter((w) => clusterQueueOf(w) === nameOf(cq))
    const status: JsonObject = {
      conditions: [
        {
          type: "Active",
          status: "True",
          reason: "Ready",
          message: "Can admit new workloads",
          lastTransitionTime: String(meta(cq).creationTimestamp),
        },
      ],
      ...summarize(mine, cq, "flavorsUsage", true),
    }
    writeStatus(store, cq, status)
  }
  for (const lq of store.all(Types.localqueues)) {
    const cq = store.find(Types.clusterqueues, "", String(asObject(lq.spec).clusterQueue ?? ""))
    const active = cq
      ? {
          type: "Active",
          status: "True",
          reason: "Ready",
          message: "Can submit new workloads to localQueue",
        }
      : {
          type: "Active",
          status: "False",
          reason: "ClusterQueueDoesNotExist",
          message: "Can't submit new workloads to clusterQueue",
        }
    const mine = workloads.filter(
      (w) => namespaceOf(w) === namespaceOf(lq) && asObject(w.spec).queueName === nameOf(lq),
    )
    const status: JsonObject = {
      conditions: [{ ...active, lastTransitionTime: String(meta(lq).creationTimestamp) }],
      ...(cq
        ? summarize(mine, cq, "flavorUsage", false)
        : { pendingWorkloads: mine.length, reservingWorkloads: 0, admittedWorkloads: 0 }),
    }
    writeStatus(store, lq, status)
  }
}
