/**
 * Browser module `/ui/infra.js`: backends and what they report (DESIGN.md §2). `worker-daemon` backends
 * get the workers and autoscaler view (swarmplane schedules and scales them); `delegated` ones (Slurm,
 * Lepton, EKS/Kueue) get the cluster view: whatever their status and capacity calls return, or the error.
 */
// biome-ignore lint/complexity/noUselessStringRaw: every browser module is raw, so an escape added later reaches the browser as written
export const infraJs = String.raw`/* swarmplane dashboard: backends, workers and autoscaler, clusters. */
import { api } from "./api.js"
import { ago, badge, card, code, dash, enc, errorBox, h, isComplex, kv, mib, muted, resources, table, value, viewHead } from "./dom.js"

const typeNames = { slurm: "Slurm", lepton: "DGX Cloud Lepton", eks: "EKS + Kueue", workers: "swarmplane workers" }
const placedBy = { slurm: "Slurm", lepton: "Lepton", eks: "Kueue" }

/** What the control loop saw at its last pass over the backend. */
function health(b) {
  const st = b.status || {}
  const el = st.healthy === undefined ? badge("not checked yet", "idle") : st.healthy ? badge("healthy") : badge("unhealthy")
  el.setAttribute("title", "At the control loop's last pass")
  return el
}

function title(b) {
  return [
    h("a", { href: "#/backends/" + enc(b.id) }, b.config.displayName || b.id),
    b.config.displayName ? h("span", { class: "id" }, b.id) : null,
  ]
}

/** GET /v1/backends/{id}/status; a failed call becomes { failed: error } so one backend never hides the others. */
async function status(id, signal) {
  try {
    return await api("/v1/backends/" + enc(id) + "/status", { signal })
  } catch (error) {
    if (error && (error.name === "AbortError" || error.status === 401)) throw error
    return { failed: error }
  }
}

/** One part of a status answer (status, capacity, autoscaler), or why it is missing. */
function part(st, name, what, render) {
  if (st.failed) return errorBox(st.failed, "Could not read the backend's status:")
  const x = st[name]
  if (!x) return h("p", { class: "empty" }, "Not reported.")
  if (x.error) return h("div", { class: "alert warn", role: "note" }, h("strong", {}, what + " unavailable: "), String(x.error))
  return render(x)
}

function lastTick(b) {
  const st = b.status || {}
  return [["Last checked", ago(st.checkedAt)], st.message ? ["Control loop message", st.message, true] : null]
}

function capacityTable(c) {
  const row = (label, r) =>
    h("tr", { "data-key": label }, h("th", { scope: "row" }, label), h("td", { class: "num" }, r ? r.cpu : dash()), h("td", { class: "num" }, r ? mib(r.memoryMiB) : dash()), h("td", { class: "num" }, r ? r.gpu : dash()))
  return table(["", ["CPU", "num"], ["Memory", "num"], ["GPU", "num"]], [row("Total", c.total), row("Free", c.free)], { cls: "compact" })
}

// Workers and autoscaler (worker-daemon) -------------------------------------------------------

function autoscalerTable(a) {
  const groups = a.groups || []
  return table(
    ["Scale group", ["Current", "num"], ["Starting", "num"], ["Demand", "num"], ["Target", "num"], ["Min–max", "num"], "Action", "Reason"],
    groups.map((g) =>
      h(
        "tr",
        { "data-key": "group-" + g.group },
        h("td", { class: "strong" }, g.group),
        h("td", { class: "num" }, g.current),
        h("td", { class: "num" }, g.starting),
        h("td", { class: "num" }, g.demand),
        h("td", { class: "num" }, g.target),
        h("td", { class: "num nowrap" }, g.min + "–" + g.max),
        h("td", {}, badge(g.action)),
        h("td", { class: "msg" }, g.reason || dash(), g.backoffUntil ? h("div", { class: "sub" }, "backing off until ", ago(g.backoffUntil)) : null),
      ),
    ),
    { label: "Scale groups", empty: "No autoscaling decision yet: the backend has no scale groups, or the autoscaler has not run." },
  )
}

function attributes(attrs) {
  const entries = Object.entries(attrs || {})
  return entries.length ? h("span", { class: "attrs" }, entries.map(([k, v]) => code(k + "=" + v))) : dash()
}

function workersTable(workers) {
  return table(
    ["Worker", "Health", "Scale group", "Address", "Resources", "Attributes", "Last seen", "Idle since"],
    workers.map((w) =>
      h(
        "tr",
        { "data-key": "worker-" + w.id },
        h("td", {}, h("span", { class: "strong" }, w.name || w.id), w.name ? h("div", { class: "sub mono" }, w.id) : null),
        h("td", {}, badge(w.health)),
        h("td", {}, w.scaleGroup || muted("hand-started")),
        h("td", {}, w.address ? code(w.address) : dash()),
        h("td", { class: "nowrap" }, resources(w.resources)),
        h("td", {}, attributes(w.attributes)),
        h("td", { class: "nowrap" }, ago(w.lastSeen)),
        h("td", { class: "nowrap" }, w.idleSince ? ago(w.idleSince) : w.health === "dead" ? dash() : badge("working")),
      ),
    ),
    { label: "Workers", empty: "No workers have registered with this backend." },
  )
}

/** A worker-daemon backend: its workers, capacity and autoscaler; heading defaults to the backend's name. */
function poolCard(b, st, workers, heading) {
  const counts = { healthy: 0, suspect: 0, dead: 0 }
  for (const w of workers) counts[w.health] = (counts[w.health] || 0) + 1
  return card(
    "pool-" + b.id,
    heading ? [heading] : [title(b), health(b)],
    kv([
      ["Workers", counts.healthy + " healthy, " + counts.suspect + " suspect, " + counts.dead + " dead"],
      ["Capacity", part(st, "capacity", "Capacity", (c) => resources(c.total))],
      ...lastTick(b),
    ]),
    h("h3", {}, "Autoscaler"),
    part(st, "autoscaler", "Autoscaler status", autoscalerTable),
    h("h3", {}, "Workers"),
    workersTable(workers),
  )
}

export const workersView = {
  nav: "workers",
  title: () => "Workers",
  head: () =>
    viewHead("Workers and autoscaler", {
      sub: "Worker-daemon backends: swarmplane places the work on its own workers and scales their groups.",
    }),
  async load({ signal }) {
    const backends = (await api("/v1/backends", { signal })).items.filter((b) => b.kind === "worker-daemon")
    const [workers, statuses] = await Promise.all([
      api("/v1/workers", { signal }),
      Promise.all(backends.map((b) => status(b.id, signal))),
    ])
    return { backends, workers: workers.items, statuses }
  },
  render({ backends, workers, statuses }) {
    if (!backends.length)
      return [card("none", null, h("p", { class: "empty" }, "This project has no worker-daemon backend (type workers). Its clusters are under Clusters."))]
    return backends.map((b, i) => poolCard(b, statuses[i], workers.filter((w) => w.backendId === b.id)))
  },
}

// Clusters (delegated) ---------------------------------------------------------------------------

/** A delegated backend: what its status and capacity calls return; heading defaults to the backend's name. */
function clusterCard(b, st, heading) {
  return card(
    "cluster-" + b.id,
    heading ? [heading] : [title(b), badge(typeNames[b.config.type] || b.config.type, "idle plain"), health(b)],
    h("p", { class: "note" }, "Placement is delegated to " + (placedBy[b.config.type] || "the cluster") + ": swarmplane submits the work and reconciles what the cluster reports."),
    kv(lastTick(b)),
    h("h3", {}, "Cluster status"),
    part(st, "status", "Status", (s) => [
      kv([["Healthy", s.healthy ? badge("healthy") : badge("unhealthy")], s.message ? ["Message", s.message] : null]),
      s.detail && Object.keys(s.detail).length ? value(s.detail) : null,
    ]),
    h("h3", {}, "Capacity"),
    part(st, "capacity", "Capacity", capacityTable),
  )
}

export const clustersView = {
  nav: "clusters",
  title: () => "Clusters",
  head: () =>
    viewHead("Clusters", {
      sub: "Delegated backends: Slurm, DGX Cloud Lepton and EKS/Kueue place the work themselves; this is what they report.",
    }),
  async load({ signal }) {
    const backends = (await api("/v1/backends", { signal })).items.filter((b) => b.kind === "delegated")
    return { backends, statuses: await Promise.all(backends.map((b) => status(b.id, signal))) }
  },
  render({ backends, statuses }) {
    if (!backends.length)
      return [card("none", null, h("p", { class: "empty" }, "This project has no delegated backend (slurm, lepton or eks). Worker pools are under Workers."))]
    return backends.map((b, i) => clusterCard(b, statuses[i]))
  },
}

// Backends -------------------------------------------------------------------------------------

export const backendList = {
  nav: "backends",
  title: () => "Backends",
  head: () => viewHead("Backends", { sub: "The clusters and worker pools this project runs on, and what the control loop last saw." }),
  load: async ({ signal }) => (await api("/v1/backends", { signal })).items,
  render(items) {
    const rows = items.map((b) =>
      h(
        "tr",
        { "data-key": "backend-" + b.id },
        h("td", {}, h("a", { href: "#/backends/" + enc(b.id), class: "strong" }, b.id)),
        h("td", {}, code(b.config.type)),
        h("td", {}, badge(b.kind, "idle plain")),
        h("td", {}, b.config.displayName || dash()),
        h("td", {}, health(b)),
        h("td", { class: "msg" }, (b.status && b.status.message) || dash()),
        h("td", { class: "nowrap" }, ago(b.status && b.status.checkedAt)),
      ),
    )
    return [
      card(
        "backends",
        null,
        table(["ID", "Type", "Kind", "Display name", "Last tick", "Message", "Checked"], rows, {
          label: "Backends",
          empty: "No backends yet. An admin registers one with POST /v1/backends.",
        }),
      ),
    ]
  },
}

export const backendDetail = {
  nav: "backends",
  title: ({ params }) => params[0],
  head(ctx, data) {
    const b = data && data.backend
    return viewHead(b ? b.config.displayName || b.id : ctx.params[0], {
      crumbs: [["Backends", "#/backends"]],
      badges: b ? [badge(typeNames[b.config.type] || b.config.type, "idle plain"), badge(b.kind, "idle plain"), health(b)] : [],
      sub: b && b.config.displayName ? h("span", { class: "mono" }, b.id) : null,
    })
  },
  async load({ params, signal }) {
    const backend = await api("/v1/backends/" + enc(params[0]), { signal })
    const workerDaemon = backend.kind === "worker-daemon"
    const [st, workers] = await Promise.all([
      status(backend.id, signal),
      workerDaemon ? api("/v1/workers?backendId=" + enc(backend.id), { signal }).then((r) => r.items) : [],
    ])
    return { backend, status: st, workers }
  },
  render({ backend: b, status: st, workers }) {
    const config = Object.entries(b.config).filter(([k]) => k !== "type" && k !== "displayName")
    return [
      b.kind === "worker-daemon" ? poolCard(b, st, workers, "Workers and autoscaler") : clusterCard(b, st, "Cluster"),
      card(
        "config",
        ["Config", h("span", { class: "card-note" }, "names secrets, never holds them")],
        kv([
          ["Type", code(b.config.type)],
          ["Kind", b.kind],
          ["Registered", ago(b.createdAt)],
          ["Config changed", ago(b.updatedAt)],
          ...config.map(([k, v]) => [k, value(v), isComplex(v)]),
        ]),
      ),
    ]
  },
}
`
