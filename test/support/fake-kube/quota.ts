/**
 * Kueue's quota arithmetic for the fake: a Workload's total requests, flavor assignment against a
 * ClusterQueue's nominal quotas with Kueue's "couldn't assign flavors" messages, and usage per flavor.
 */
import { asArray, asObject, formatQuantity, type JsonObject, parseQuantity } from "./resources"

/** Usage by flavor, then resource, in base units. */
export type Usage = Map<string, Map<string, number>>

/** Total requests of a Workload's pod sets: per-pod container requests (limits when unset) × count. */
export function podSetRequests(spec: JsonObject): Record<string, number> {
  const total: Record<string, number> = {}
  for (const ps of asArray(spec.podSets).map(asObject)) {
    const count = Number(ps.count ?? 1)
    for (const c of asArray(asObject(asObject(ps.template).spec).containers).map(asObject)) {
      const resources = asObject(c.resources)
      const perPod = { ...asObject(resources.limits), ...asObject(resources.requests) }
      for (const [r, q] of Object.entries(perPod)) total[r] = (total[r] ?? 0) + parseQuantity(q) * count
    }
  }
  return total
}

/** Kueue's flavor assignment: for each requested resource, the first flavor of its group where everything fits. */
export function assignFlavors(
  cq: JsonObject,
  usage: Usage,
  requests: Record<string, number>,
): { flavors: Record<string, string> } | { message: string } {
  const groups = asArray(asObject(cq.spec).resourceGroups).map(asObject)
  const flavors: Record<string, string> = {}
  const problems: string[] = []
  for (const group of groups) {
    const covered = asArray(group.coveredResources).map(String)
    const wanted = Object.entries(requests).filter(([r, n]) => covered.includes(r) && n > 0)
    if (wanted.length === 0) continue
    let chosen: string | undefined
    const whyNot: string[] = []
    for (const f of asArray(group.flavors).map(asObject)) {
      const quota = new Map(
        asArray(f.resources).map((r) => [String(asObject(r).name), parseQuantity(asObject(r).nominalQuota)]),
      )
      const failures = wanted.flatMap(([r, n]) => {
        const nominal = quota.get(r) ?? 0
        const used = usage.get(String(f.name))?.get(r) ?? 0
        if (n > nominal)
          return [
            `insufficient quota for ${r} in flavor ${String(f.name)}, request > maximum capacity (${formatQuantity(n)} > ${formatQuantity(nominal)})`,
          ]
        if (used + n > nominal)
          return [
            `insufficient unused quota for ${r} in flavor ${String(f.name)}, ${formatQuantity(used + n - nominal)} more needed`,
          ]
        return []
      })
      if (failures.length === 0) {
        chosen = String(f.name)
        break
      }
      whyNot.push(...failures)
    }
    if (chosen) for (const [r] of wanted) flavors[r] = chosen
    else problems.push(...whyNot)
  }
  for (const [r, n] of Object.entries(requests))
    if (n > 0 && !groups.some((g) => asArray(g.coveredResources).map(String).includes(r)))
      problems.push(`resource ${r} unavailable in ClusterQueue`)
  if (problems.length > 0)
    return { message: `couldn't assign flavors to pod set main: ${problems.join(", ")}` }
  return { flavors }
}

export function addUsage(usage: Usage, flavor: string, resource: string, amount: number): void {
  const f = usage.get(flavor) ?? new Map<string, number>()
  f.set(resource, (f.get(resource) ?? 0) + amount)
  usage.set(flavor, f)
}

export const quantities = (requests: Record<string, number>): JsonObject =>
  Object.fromEntries(Object.entries(requests).map(([r, n]) => [r, formatQuantity(n)]))
