/**
 * API discovery for clients such as kubectl: `/api`, `/apis` and the resource lists of each group
 * version the fake serves (with the `pods/log` and `/status` subresources).
 */
import { type JsonObject, KubeError, Types } from "./resources"

export function groupList(): JsonObject {
  const groups = new Map<string, string[]>()
  for (const t of Object.values(Types))
    if (t.group) groups.set(t.group, [...new Set([...(groups.get(t.group) ?? []), t.version])])
  return {
    kind: "APIGroupList",
    apiVersion: "v1",
    groups: [...groups].map(([name, versions]) => ({
      name,
      versions: versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v })),
      preferredVersion: { groupVersion: `${name}/${versions[0]}`, version: versions[0] ?? "" },
    })),
  }
}

export function resourceList(group: string, version: string): JsonObject {
  const types = Object.values(Types).filter((t) => t.group === group && t.version === version)
  if (types.length === 0)
    throw new KubeError(404, "NotFound", "the server could not find the requested resource")
  const verbs = ["create", "delete", "get", "list", "patch", "update"]
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: group ? `${group}/${version}` : version,
    resources: types.flatMap((t) => {
      const main = {
        name: t.plural,
        singularName: t.kind.toLowerCase(),
        namespaced: t.namespaced,
        kind: t.kind,
        verbs,
      }
      return t === Types.pods
        ? [main, { name: "pods/log", singularName: "", namespaced: true, kind: "Pod", verbs: ["get"] }]
        : [
            main,
            {
              name: `${t.plural}/status`,
              singularName: "",
              namespaced: t.namespaced,
              kind: t.kind,
              verbs: ["get", "patch", "update"],
            },
          ]
    }),
  }
}
