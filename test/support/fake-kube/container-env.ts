/**
 * The environment a container process gets, as the kubelet builds it: a few host variables (to find
 * programs), `HOSTNAME` = the pod name, the declared `env` with `$(VAR)` references and `fieldRef`s
 * (the downward API: name, namespace, uid, labels, annotations, pod IP), and `PORT` = the loopback
 * port the fake remapped the first container port to.
 */
import { asArray, asObject, type Json, type JsonObject } from "./resources"
import { labelsOf, meta, nameOf } from "./store"

/** A container's environment: a few host variables, then the downward and declared env, then `PORT`. */
export function containerEnv(
  pod: JsonObject,
  c: JsonObject,
  localPort: number | undefined,
): Record<string, string> {
  const env: Record<string, string> = {}
  for (const key of ["PATH", "HOME", "TMPDIR", "LANG"]) {
    const v = process.env[key]
    if (v !== undefined) env[key] = v
  }
  env.HOSTNAME = nameOf(pod)
  env.KUBERNETES_SERVICE_HOST = "127.0.0.1"
  for (const e of asArray(c.env)) {
    const item = asObject(e)
    const name = String(item.name)
    if (typeof item.value === "string")
      env[name] = item.value.replace(/\$\((\w+)\)/g, (all, v) => env[v] ?? all)
    else {
      const ref = asObject(asObject(item.valueFrom).fieldRef)
      if (typeof ref.fieldPath === "string") env[name] = fieldValue(pod, ref.fieldPath)
    }
  }
  // Every pod shares the host: the first declared port is where the container must listen.
  if (localPort !== undefined) env.PORT = String(localPort)
  return env
}

function fieldValue(pod: JsonObject, path: string): string {
  const m = meta(pod)
  const keyed = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path)
  if (keyed?.[1] && keyed[2]) {
    const map = keyed[1] === "labels" ? labelsOf(pod) : (asObject(m.annotations) as Record<string, string>)
    return map[keyed[2]] ?? ""
  }
  const simple: Record<string, Json | undefined> = {
    "metadata.name": m.name,
    "metadata.namespace": m.namespace,
    "metadata.uid": m.uid,
    "spec.nodeName": asObject(pod.spec).nodeName ?? "fake-node",
    "spec.serviceAccountName": asObject(pod.spec).serviceAccountName ?? "default",
    "status.podIP": "127.0.0.1",
    "status.hostIP": "127.0.0.1",
  }
  return String(simple[path] ?? "")
}
