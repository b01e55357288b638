/**
 * The PATCH flavours the apiserver accepts (Part D): JSON merge patch (RFC 7396), strategic merge
 * patch for built-in kinds (lists of named things such as `containers` and `env` merge by `name`),
 * and JSON patch (RFC 6902: add, replace, remove, test).
 */
import { badRequest, isObject, type Json, KubeError } from "./resources"

export function mergePatch(target: Json | undefined, patch: Json): Json {
  if (!isObject(patch)) return patch
  const result: { [k: string]: Json } = isObject(target) ? { ...target } : {}
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key]
    else result[key] = mergePatch(result[key], value)
  }
  return result
}

/** Lists that strategic merge patch merges by a key instead of replacing (the common ones). */
const mergeKeys: Record<string, string> = {
  containers: "name",
  initContainers: "name",
  env: "name",
  volumes: "name",
  volumeMounts: "mountPath",
  ports: "containerPort",
  imagePullSecrets: "name",
  tolerations: "key",
}

export function strategicMergePatch(target: Json | undefined, patch: Json): Json {
  if (!isObject(patch)) return patch
  const result: { [k: string]: Json } = isObject(target) ? { ...target } : {}
  for (const [key, value] of Object.entries(patch)) {
    const mergeKey = mergeKeys[key]
    const current = result[key]
    if (value === null) delete result[key]
    else if (mergeKey && Array.isArray(value) && Array.isArray(current)) {
      const merged = [...current]
      for (const item of value) {
        const i = merged.findIndex((x) => isObject(x) && isObject(item) && x[mergeKey] === item[mergeKey])
        const old = merged[i]
        if (isObject(item) && item.$patch === "delete") {
          if (i >= 0) merged.splice(i, 1)
        } else if (i >= 0 && old !== undefined) merged[i] = strategicMergePatch(old, item)
        else merged.push(item)
      }
      result[key] = merged
    } else result[key] = strategicMergePatch(current, value)
  }
  return result
}

/** RFC 6902, enough of it for clients that send `[{op, path, value}]`. */
export function jsonPatch(target: Json, ops: Json): Json {
  if (!Array.isArray(ops)) throw badRequest("json patch must be an array of operations")
  let doc = structuredClone(target)
  for (const op of ops) {
    if (!isObject(op) || typeof op.op !== "string" || typeof op.path !== "string")
      throw badRequest("json patch: each operation needs op and path")
    const parts = op.path
      .split("/")
      .slice(1)
      .map((p) => p.replaceAll("~1", "/").replaceAll("~0", "~"))
    const last = parts.pop()
    if (last === undefined) {
      doc = op.value ?? null
      continue
    }
    let parent: Json = doc
    for (const p of parts)
      parent = Array.isArray(parent)
        ? (parent[Number(p)] ?? null)
        : isObject(parent)
          ? (parent[p] ?? null)
          : null
    if (parent === null || typeof parent !== "object")
      throw new KubeError(422, "Invalid", `json patch: path ${op.path} does not exist`)
    const container = parent as { [k: string]: Json } | Json[]
    if (op.op === "test") {
      const current = Array.isArray(container) ? container[Number(last)] : container[last]
      if (JSON.stringify(current) !== JSON.stringify(op.value))
        throw new KubeError(422, "Invalid", `json patch: test failed at ${op.path}`)
    } else if (op.op === "remove") {
      if (Array.isArray(container)) container.splice(Number(last), 1)
      else delete container[last]
    } else if (op.op === "add" || op.op === "replace") {
      if (Array.isArray(container)) {
        const i = last === "-" ? container.length : Number(last)
        if (op.op === "add") container.splice(i, 0, op.value ?? null)
        else container[i] = op.value ?? null
      } else container[last] = op.value ?? null
    } else throw badRequest(`json patch: unsupported op ${op.op}`)
  }
  return doc
}
