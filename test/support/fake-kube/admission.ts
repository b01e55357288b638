/**
 * What the fake apiserver does to a new or updated object before storing it: defaults (Job,
 * Deployment, Service), Kueue's mutating webhook (a Job with a queue name is created suspended), and
 * the validation errors a client most often meets (422 Invalid with the field that is wrong).
 */
import { defaultJob } from "./jobs"
import { QueueLabel } from "./kueue"
import { asArray, asObject, invalid, type JsonObject, type ResourceType, Types } from "./resources"
import { labelsOf, meta, nameOf } from "./store"

export function admit(t: ResourceType, o: JsonObject): void {
  if (t === Types.jobs) {
    defaultJob(o)
    if (labelsOf(o)[QueueLabel]) asObject(o.spec).suspend = true
  }
  if (t === Types.deployments) {
    const spec = asObject(o.spec)
    o.spec = spec
    spec.replicas ??= 1
    spec.strategy ??= { type: "RollingUpdate", rollingUpdate: { maxUnavailable: "25%", maxSurge: "25%" } }
    spec.revisionHistoryLimit ??= 10
    spec.progressDeadlineSeconds ??= 600
  }
  if (t === Types.services) {
    const spec = asObject(o.spec)
    o.spec = spec
    spec.type ??= "ClusterIP"
    spec.clusterIP ??= `10.100.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250) + 1}`
  }
  if (t === Types.pods) {
    const spec = asObject(o.spec)
    o.spec = spec
    spec.restartPolicy ??= "Always"
  }
}

export function validate(t: ResourceType, o: JsonObject): void {
  const name = nameOf(o) || String(meta(o).generateName ?? "")
  const podSpec = (prefix: string, spec: JsonObject) => {
    if (asArray(spec.containers).length === 0)
      throw invalid(t, name, `${prefix}.containers`, "Required value", "FieldValueRequired")
  }
  // A preStop sleep must end before the grace period does (core/v1 validation, Kubernetes 1.30+).
  const preStop = (prefix: string, spec: JsonObject) => {
    const grace = Number(spec.terminationGracePeriodSeconds ?? 30)
    for (const [i, c] of asArray(spec.containers).entries()) {
      const sleep = asObject(asObject(asObject(asObject(c).lifecycle).preStop).sleep)
      if (!("seconds" in sleep)) continue
      const seconds = Number(sleep.seconds)
      if (!Number.isInteger(seconds) || seconds < 0 || seconds >= grace)
        throw invalid(
          t,
          name,
          `${prefix}.containers[${i}].lifecycle.preStop.sleep.seconds`,
          `Invalid value: ${String(sleep.seconds)}: must be non-negative and less than terminationGracePeriodSeconds (${grace})`,
        )
    }
  }
  if (t === Types.jobs) {
    const spec = asObject(asObject(asObject(o.spec).template).spec)
    podSpec("spec.template.spec", spec)
    const policy = spec.restartPolicy ?? "Always"
    if (policy !== "Never" && policy !== "OnFailure")
      throw invalid(
        t,
        name,
        "spec.template.spec.restartPolicy",
        `Unsupported value: "${String(policy)}": supported values: "OnFailure", "Never"`,
        "FieldValueNotSupported",
      )
  }
  if (t === Types.deployments) {
    const spec = asObject(o.spec)
    const selector = asObject(asObject(spec.selector).matchLabels)
    if (Object.keys(selector).length === 0)
      throw invalid(t, name, "spec.selector", "Required value", "FieldValueRequired")
    const labels = asObject(asObject(asObject(spec.template).metadata).labels)
    if (!Object.entries(selector).every(([k, v]) => labels[k] === v))
      throw invalid(
        t,
        name,
        "spec.template.metadata.labels",
        "Invalid value: `selector` does not match template `labels`",
      )
    podSpec("spec.template.spec", asObject(asObject(spec.template).spec))
    // apps/v1 validation of a rolling update: both bounds 0 could never replace a pod.
    const rolling = asObject(asObject(spec.strategy).rollingUpdate)
    const zero = (v: unknown) => v === 0 || v === "0%"
    if (zero(rolling.maxSurge) && zero(rolling.maxUnavailable))
      throw invalid(
        t,
        name,
        "spec.strategy.rollingUpdate.maxUnavailable",
        "Invalid value: 0: may not be 0 when `maxSurge` is 0",
      )
    preStop("spec.template.spec", asObject(asObject(spec.template).spec))
  }
  if (t === Types.pods) {
    podSpec("spec", asObject(o.spec))
    preStop("spec", asObject(o.spec))
  }
}
