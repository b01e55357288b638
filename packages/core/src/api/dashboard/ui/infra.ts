/**
 * Backends and what they report (DESIGN.md §2). `worker-daemon` backends get the workers and autoscaler
 * view (swarmplane schedules and scales them); `delegated` ones (Slurm, Lepton, EKS/Kueue) get the
 * cluster view: whatever their status and capacity calls return, or the error.
 */
import { api, isAbort, statusOf } from "./api"
import { type Child, h } from "./dom"
import { ago, badge, code, dash, enc, mib, muted, resources } from "./format"
import { card, errorBox, type Head, kv, type Pair, table, value, viewHead } from "./layout"
import {
  type AutoscalerStatus,
  type Backend,
  type BackendStatus,
  type Capacity,
  type ClusterStatus,
  type Page,
  type Reported,
  unavailable,
  type Worker,
} from "./types"
import type { View } from "./view"

export const typeNames: Record<string, string> = {
  slurm: "Slurm",
  lepton: "DGX Cloud Lepton",
  eks: "EKS + Kueue",
  workers: "swarmplane workers",
}
const placedBy: Record<string, string> = { slurm: "Slurm", lepton: "Lepton", eks: "Kueue" }

/** A status answer, or the error of the call (so one backend never hides the others). */
export type StatusAnswer = BackendStatus | { failed: unknown }

/** What the control loop saw at its last pass over the backend. */
export function health(b: Backend): HTMLSpanElement {
  const st: Backend["status"] = b.status || {}
  const el =
    st.healthy === undefined
      ? badge("not checked yet", "idle")
      : st.healthy
        ? badge("healthy")
        : badge("unhealthy")
  el.setAttribute("title", "At the control loop's last pass")
  return el
}

function title(b: Backend): Child[] {
  return [
    h("a", { href: `#/backends/${enc(b.id)}` }, b.config.displayName || b.id),
    b.config.displayName ? h("span", { class: "id" }, b.id) : null,
  ]
}

/** GET /v1/backends/{id}/status; a failed call becomes { failed: error }. */
export async function status(id: string, signal: AbortSignal): Promise<StatusAnswer> {
  try {
    return await api<BackendStatus>(`/v1/backends/${enc(id)}/status`, { signal })
  } catch (error) {
    if (isAbort(error) || statusOf(error) === 401) throw error
    return { failed: error }
  }
}

/** One part of a status answer (status, capacity, autoscaler), or why it is missing. */
function part<T>(
  st: StatusAnswer,
  pick: (answer: BackendStatus) => Reported<T> | undefined,
  what: string,
  render: (x: T) => Child,
): Child {
  if ("failed" in st) return errorBox(st.failed, "Could not read the backend's status:")
  const x = pick(st)
  if (!x) return h("p", { class: "empty" }, "Not reported.")
  if (unavailable(x))
    return h(
      "div",
      { class: "alert warn", role: "note" },
      h("strong", {}, `${what} unavailable: `),
      String(x.error),
    )
  return render(x)
}

function lastTick(b: Backend): Pair[] {
  const st: Backend["status"] = b.status || {}
  const pairs: Pair[] = [["Last checked", ago(st.checkedAt)]]
  if (st.message) pairs.push(["Control loop message", st.message, true])
  return pairs
}

function capacityTable(c: Capacity): HTMLElement {
  const row = (label: string, r: Capacity["total"] | undefined) =>
    h(
      "tr",
      { "data-key": label },
      h("th", { scope: "row" }, label),
      h("td", { class: "num" }, r ? r.cpu : dash()),
      h("td", { class: "num" }, r ? mib(r.memoryMiB) : dash()),
      h("td", { class: "num" }, r ? r.gpu : dash()),
    )
  return table(
    ["", ["CPU", "num"], ["Memory", "num"], ["GPU", "num"]],
    [row("Total", c.total), row("Free", c.free)],
    {
      cls: "compact",
    },
  )
}

// Workers and autoscaler (worker-daemon) -------------------------------------------------------

function autoscalerTable(a: AutoscalerStatus): HTMLElement {
  const groups = a.groups || []
  const heads: Head[] = [
    "Scale group",
    ["Current", "num"],
    ["Starting", "num"],
    ["Demand", "num"],
    ["Target", "num"],
    ["Min–max", "num"],
    "Action",
    "Reason",
  ]
  return table(
    heads,
    groups.map((g) =>
      h(
        "tr",
        { "data-key": `group-${g.group}` },
        h("td", { class: "strong" }, g.group),
        h("td", { class: "num" }, g.current),
        h("td", { class: "num" }, g.starting),
        h("td", { class: "num" }, g.demand),
        h("td", { class: "num" }, g.target),
        h("td", { class: "num nowrap" }, `${g.min}–${g.max}`),
        h("td", {}, badge(g.action)),
        h(
          "td",
          { class: "msg" },
          g.reason || dash(),
          g.backoffUntil ? h("div", { class: "sub" }, "backing off until ", ago(g.backoffUntil)) : null,
        ),
      ),
    ),
    {
      label: "Scale groups",
      empty: "No autoscaling decision yet: the backend has no scale groups, or the autoscaler has not run.",
    },
  )
}

function attributes(attrs: Record<string, string> | undefined): HTMLElement {
  const entries = Object.entries(attrs || {})
  return entries.length
    ? h(
        "span",
        { class: "attrs" },
        entries.map(([k, v]) => code(`${k}=${v}`)),
      )
    : dash()
}

function workersTable(workers: Worker[]): HTMLElement {
  return table(
    ["Worker", "Health", "Scale group", "Address", "Resources", "Attributes", "Last seen", "Idle since"],
    workers.map((w) =>
      h(
        "tr",
        { "data-key": `worker-${w.id}` },
        h(
          "td",
          {},
          h("span", { class: "strong" }, w.name || w.id),
          w.name ? h("div", { class: "sub mono" }, w.id) : null,
        ),
        h("td", {}, badge(w.health)),
        h("td", {}, w.scaleGroup || muted("hand-started")),
        h("td", {}, w.address ? code(w.address) : dash()),
        h("td", { class: "nowrap" }, resources(w.resources)),
        h("td", {}, attributes(w.attributes)),
        h("td", { class: "nowrap" }, ago(w.lastSeen)),
        h(
          "td",
          { class: "nowrap" },
          w.idleSince ? ago(w.idleSince) : w.health === "dead" ? dash() : badge("working"),
        ),
      ),
    ),
    { label: "Workers", empty: "No workers have registered with this backend." },
  )
}

/** A worker-daemon backend: its workers, capacity and autoscaler; heading defaults to the backend's name. */
export function poolCard(b: Backend, st: StatusAnswer, workers: Worker[], heading?: string): HTMLElement {
  const counts: Record<string, number> = { healthy: 0, suspect: 0, dead: 0 }
  for (const w of workers) counts[w.health] = (counts[w.health] || 0) + 1
  return card(
    `pool-${b.id}`,
    heading ? [heading] : [title(b), health(b)],
    kv([
      ["Workers", `${counts.healthy} healthy, ${counts.suspect} suspect, ${counts.dead} dead`],
      [
        "Capacity",
        part(
          st,
          (a) => a.capacity,
          "Capacity",
          (c) => resources(c.total),
        ),
      ],
      ...lastTick(b),
    ]),
    h("h3", {}, "Autoscaler"),
    part(st, (a) => a.autoscaler, "Autoscaler status", autoscalerTable),
    h("h3", {}, "Workers"),
    workersTable(workers),
  )
}

interface PoolsData {
  backends: Backend[]
  workers: Worker[]
  statuses: StatusAnswer[]
}

export const workersView: View<PoolsData> = {
  nav: "workers",
  title: () => "Workers",
  head: () =>
    viewHead("Workers and autoscaler", {
      sub: "Worker-daemon backends: swarmplane places the work on its own workers and scales their groups.",
    }),
  async load({ signal }) {
    const backends = (await api<Page<Backend>>("/v1/backends", { signal })).items.filter(
      (b) => b.kind === "worker-daemon",
    )
    const [workers, statuses] = await Promise.all([
      api<Page<Worker>>("/v1/workers", { signal }),
      Promise.all(backends.map((b) => status(b.id, signal))),
    ])
    return { backends, workers: workers.items, statuses }
  },
  render({ backends, workers, statuses }) {
    if (!backends.length) {
      const none =
        "This project has no worker-daemon backend (type workers). Its clusters are under Clusters."
      return [card("none", null, h("p", { class: "empty" }, none))]
    }
    return backends.map((b, i) =>
      poolCard(
        b,
        statuses[i]!,
        workers.filter((w) => w.backendId === b.id),
      ),
    )
  },
}

// Clusters (delegated) ---------------------------------------------------------------------------

function clusterStatus(s: ClusterStatus): Child[] {
  return [
    kv([
      ["Healthy", s.healthy ? badge("healthy") : badge("unhealthy")],
      s.message ? ["Message", s.message] : null,
    ]),
    s.detail && Object.keys(s.detail).length ? value(s.detail) : null,
  ]
}

/** A delegated backend: what its status and capacity calls return; heading defaults to the backend's name. */
export function clusterCard(b: Backend, st: StatusAnswer, heading?: string): HTMLElement {
  const type = b.config.type
  const placement = `Placement is delegated to ${placedBy[type] || "the cluster"}: swarmplane submits the work and reconciles what the cluster reports.`
  return card(
    `cluster-${b.id}`,
    heading ? [heading] : [title(b), badge(typeNames[type] || type, "idle plain"), health(b)],
    h("p", { class: "note" }, placement),
    kv(lastTick(b)),
    h("h3", {}, "Cluster status"),
    part(st, (a) => a.status, "Status", clusterStatus),
    h("h3", {}, "Capacity"),
    part(st, (a) => a.capacity, "Capacity", capacityTable),
  )
}

interface ClustersData {
  backends: Backend[]
  statuses: StatusAnswer[]
}

export const clustersView: View<ClustersData> = {
  nav: "clusters",
  title: () => "Clusters",
  head: () =>
    viewHead("Clusters", {
      sub: "Delegated backends: Slurm, DGX Cloud Lepton and EKS/Kueue place the work themselves; this is what they report.",
    }),
  async load({ signal }) {
    const backends = (await api<Page<Backend>>("/v1/backends", { signal })).items.filter(
      (b) => b.kind === "delegated",
    )
    return { backends, statuses: await Promise.all(backends.map((b) => status(b.id, signal))) }
  },
  render({ backends, statuses }) {
    if (!backends.length) {
      const none =
        "This project has no delegated backend (slurm, lepton or eks). Worker pools are under Workers."
      return [card("none", null, h("p", { class: "empty" }, none))]
    }
    return backends.map((b, i) => clusterCard(b, statuses[i]!))
  },
}
