/**
 * Browser module `/ui/swarms.js`: the swarm list (phase, endpoint, replicas ready/total) and a swarm's
 * detail (replicas, serving handle, generation against observedGeneration, the jobs that call it).
 */
// biome-ignore lint/complexity/noUselessStringRaw: every browser module is raw, so an escape added later reaches the browser as written
export const swarmsJs = String.raw`/* swarmplane dashboard: swarms. */
import { api } from "./api.js"
import { ago, badge, card, code, dash, enc, h, kv, mib, muted, phaseBadge, table, viewHead } from "./dom.js"
import { jobsTable } from "./jobs.js"

function replicas(status) {
  const ready = (status && status.ready) || 0
  const total = (status && status.total) || 0
  const tone = total > 0 && ready === total ? "ok" : ready < total ? "warn" : ""
  return h("span", { class: ["ratio", tone], title: ready + " of " + total + " replicas ready" }, ready + " / " + total)
}

function deleting(s) {
  return s.desired === "deleted" && s.phase !== "STOPPED" ? [" ", badge("deleting")] : null
}

export const swarmList = {
  nav: "swarms",
  title: () => "Swarms",
  head: () => viewHead("Swarms", { sub: "Replicas of a model server behind one OpenAI-compatible endpoint each." }),
  load: ({ signal }) => api("/v1/swarms?limit=500", { signal }),
  render(page) {
    const rows = page.items.map((s) =>
      h(
        "tr",
        { "data-key": "swarm-" + s.name },
        h("td", {}, h("a", { href: "#/swarms/" + enc(s.name), class: "strong" }, s.name), s.message ? h("div", { class: "sub" }, s.message) : null),
        h("td", { class: "nowrap" }, phaseBadge(s.phase), deleting(s)),
        h("td", {}, s.url ? h("code", { class: "url" }, s.url) : muted("not yet")),
        h("td", { class: "num" }, replicas(s.replicaStatus)),
        h("td", {}, h("a", { href: "#/backends/" + enc(s.backendId) }, s.backendId)),
        h("td", {}, s.model),
        h("td", { class: "nowrap" }, ago(s.updatedAt)),
      ),
    )
    return [
      card(
        "swarms",
        null,
        table(["Name", "Phase", "Endpoint", ["Replicas", "num"], "Backend", "Model", "Updated"], rows, {
          label: "Swarms",
          empty: "No swarms yet. Create one with POST /v1/swarms.",
        }),
      ),
      page.nextCursor ? h("p", { class: "note", "data-key": "more" }, "Showing the first " + page.items.length + " swarms.") : null,
    ]
  },
}

export const swarmDetail = {
  nav: "swarms",
  title: ({ params }) => params[0],
  head(ctx, data) {
    const s = data && data.swarm
    return viewHead(ctx.params[0], {
      crumbs: [["Swarms", "#/swarms"]],
      badges: s ? [phaseBadge(s.phase), deleting(s)] : [],
      sub: s ? s.model : null,
    })
  },
  async load({ params, signal }) {
    const name = enc(params[0])
    const [swarm, jobs] = await Promise.all([
      api("/v1/swarms/" + name, { signal }),
      api("/v1/jobs?limit=10&swarm=" + name, { signal }),
    ])
    return { swarm, jobs: jobs.items }
  },
  render({ swarm: s, jobs }) {
    const current = s.observedGeneration === s.generation
    const perReplica = [s.cpusPerReplica + " CPU", mib(s.memoryMiBPerReplica)]
    if (s.gpusPerReplica) perReplica.push(s.gpusPerReplica + " GPU")
    return [
      s.message ? h("div", { class: "alert info alert-slot", "data-key": "message" }, s.message) : null,
      card(
        "overview",
        "Overview",
        kv([
          ["Phase", [phaseBadge(s.phase), deleting(s)]],
          ["Desired", s.desired],
          ["Endpoint", s.url ? h("code", { class: "url" }, s.url) : muted("not yet known")],
          ["Replicas ready", replicas(s.replicaStatus)],
          [
            "Generation",
            [String(s.generation), " ", muted("(observed " + s.observedGeneration + ")"), " ", badge(current ? "current" : "rolling out")],
          ],
          ["Backend", h("a", { href: "#/backends/" + enc(s.backendId) }, s.backendId)],
          ["Per replica", perReplica.join(" · ")],
          ["Port and health check", [String(s.port), " ", code(s.healthPath)]],
          ["Image", s.image || muted("backend default")],
          s.autoscaling ? ["Autoscaling", s.autoscaling.minReplicas + "–" + s.autoscaling.maxReplicas + " replicas"] : ["Replicas asked for", String(s.replicas)],
          ["Created", ago(s.createdAt)],
          ["Updated", ago(s.updatedAt)],
        ]),
      ),
      card(
        "replicas",
        "Replicas",
        table(
          [["#", "num idx"], "State", "URL", "Message"],
          s.replicaStatus.items.map((r) =>
            h(
              "tr",
              { "data-key": "replica-" + r.index },
              h("td", { class: "num idx" }, r.index),
              h("td", {}, badge(r.state)),
              h("td", {}, r.url ? h("code", { class: "url" }, r.url) : dash()),
              h("td", { class: "msg" }, r.message || dash()),
            ),
          ),
          { label: "Replicas", empty: "No replica has reported yet." },
        ),
      ),
      card(
        "handle",
        "Serving handle",
        s.handle
          ? kv([
              ["ID", code(s.handle.id)],
              ["URL", s.handle.url ? h("code", { class: "url" }, s.handle.url) : dash()],
              ...Object.entries(s.handle.meta || {}).map(([k, v]) => [k, Array.isArray(v) ? v.join(", ") : String(v)]),
            ])
          : h("p", { class: "empty" }, "No deployment yet: the handle appears once the backend has created it."),
      ),
      card(
        "jobs",
        ["Recent jobs", h("span", { class: "spacer" }), h("a", { href: "#/jobs?swarm=" + enc(s.name) }, "All jobs against " + s.name)],
        jobsTable(jobs, "No jobs have called this swarm yet."),
      ),
    ]
  },
}
`
