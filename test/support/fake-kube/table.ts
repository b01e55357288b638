/**
 * Server-side printing: the `meta.k8s.io/v1` Table that `kubectl get` asks for
 * (`Accept: application/json;as=Table;...`), with the columns kubectl users know for pods
 * (READY, STATUS, RESTARTS), Jobs (STATUS, COMPLETIONS, DURATION) and Workloads (QUEUE, RESERVED IN,
 * ADMITTED, FINISHED); other kinds get NAME and AGE.
 */
import { asArray, asObject, type Json, type JsonObject, type ResourceType, Types } from "./resources"
import { meta } from "./store"

type Column = [name: string, type: string, cell: (o: JsonObject, now: number) => Json]

const findCondition = (o: JsonObject, type: string) =>
  asArray(asObject(o.status).conditions)
    .map(asObject)
    .find((c) => c.type === type)
const isTrue = (o: JsonObject, type: string) => findCondition(o, type)?.status === "True"

/** kubectl's short durations: `42s`, `3m5s`, `17m`, `5h2m`, `3d`. */
export function shortDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000))
  if (s < 120) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`
  if (m < 180) return `${m}m`
  const h = Math.floor(m / 60)
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`
  if (h < 48) return `${h}h`
  return `${Math.floor(h / 24)}d`
}

const age: Column = [
  "Age",
  "string",
  (o, now) => shortDuration(now - Date.parse(String(meta(o).creationTimestamp))),
]
const name: Column = ["Name", "string", (o) => String(meta(o).name)]

function podStatus(o: JsonObject): string {
  if (meta(o).deletionTimestamp) return "Terminating"
  for (const c of asArray(asObject(o.status).containerStatuses).map(asObject)) {
    const state = asObject(c.state)
    const reason = asObject(state.waiting).reason ?? asObject(state.terminated).reason
    if (typeof reason === "string" && reason !== "") return reason
  }
  return String(asObject(o.status).phase ?? "Pending")
}

function jobStatus(o: JsonObject): string {
  if (isTrue(o, "Complete")) return "Complete"
  if (isTrue(o, "Failed")) return "Failed"
  if (asObject(o.spec).suspend === true) return "Suspended"
  return "Running"
}

const columns = new Map<ResourceType, Column[]>([
  [
    Types.pods,
    [
      name,
      [
        "Ready",
        "string",
        (o) => {
          const cs = asArray(asObject(o.status).containerStatuses).map(asObject)
          const total = asArray(asObject(o.spec).containers).length
          return `${cs.filter((c) => c.ready === true).length}/${total}`
        },
      ],
      ["Status", "string", podStatus],
      [
        "Restarts",
        "string",
        (o) =>
          String(
            asArray(asObject(o.status).containerStatuses)
              .map(asObject)
              .reduce((n, c) => n + Number(c.restartCount ?? 0), 0),
          ),
      ],
      age,
    ],
  ],
  [
    Types.jobs,
    [
      name,
      ["Status", "string", jobStatus],
      [
        "Completions",
        "string",
        (o) => `${Number(asObject(o.status).succeeded ?? 0)}/${Number(asObject(o.spec).completions ?? 1)}`,
      ],
      [
        "Duration",
        "string",
        (o, now) => {
          const status = asObject(o.status)
          if (typeof status.startTime !== "string") return ""
          const end = typeof status.completionTime === "string" ? Date.parse(status.completionTime) : now
          return shortDuration(end - Date.parse(status.startTime))
        },
      ],
      age,
    ],
  ],
  [
    Types.workloads,
    [
      name,
      ["Queue", "string", (o) => String(asObject(o.spec).queueName ?? "")],
      ["Reserved in", "string", (o) => String(asObject(asObject(o.status).admission).clusterQueue ?? "")],
      ["Admitted", "string", (o) => String(findCondition(o, "Admitted")?.status ?? "")],
      ["Finished", "string", (o) => String(findCondition(o, "Finished")?.status ?? "")],
      age,
    ],
  ],
])

export const wantsTable = (accept: string | undefined) => (accept ?? "").includes("as=Table")

export function table(t: ResourceType, items: JsonObject[], listMeta: JsonObject, now: number): JsonObject {
  const cols = columns.get(t) ?? [name, age]
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: listMeta,
    columnDefinitions: cols.map(([n, type]) => ({
      name: n,
      type,
      format: n === "Name" ? "name" : "",
      description: n,
      priority: 0,
    })),
    rows: items.map((o) => ({
      cells: cols.map(([, , cell]) => cell(o, now)),
      object: { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: meta(o) },
    })),
  }
}
