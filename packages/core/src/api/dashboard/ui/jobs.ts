/**
 * The job list (filter by status or swarm, progress from `counts`) and the jobs table and status badges
 * that the swarm and job pages share.
 */
import { api } from "./api"
import { type Child, h } from "./dom"
import { ago, badge, dash, duration, enc, progress } from "./format"
import { card, type Head, table, viewHead } from "./layout"
import type { Job, Page } from "./types"
import type { View } from "./view"

type JobStatus = Job["status"]

const Statuses: readonly JobStatus[] = ["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"]
export const Terminal: readonly JobStatus[] = ["SUCCEEDED", "FAILED", "CANCELLED"]
const PageStep = 50

export function statusBadges(job: Job): Child[] {
  return [
    badge(job.status),
    job.cancelRequested && !Terminal.includes(job.status) ? [" ", badge("cancelling")] : null,
  ]
}

export function elapsed(job: Job): string {
  const end = job.finishedAt ? Date.parse(job.finishedAt) : Date.now()
  return duration(end - Date.parse(job.createdAt))
}

/** The jobs table, shared with the swarm detail. */
export function jobsTable(jobs: Job[], empty: string): HTMLElement {
  const rows = jobs.map((j) =>
    h(
      "tr",
      { "data-key": `job-${j.id}` },
      h(
        "td",
        {},
        h("a", { href: `#/jobs/${enc(j.id)}`, class: "strong" }, j.spec.name),
        h("div", { class: "sub mono" }, j.id),
      ),
      h(
        "td",
        {},
        h("span", { class: "nowrap" }, statusBadges(j)),
        j.pendingReason ? h("div", { class: "sub" }, j.pendingReason) : null,
      ),
      h("td", {}, progress(j.counts, j.spec.tasks)),
      h("td", { class: "num" }, j.spec.tasks),
      h("td", {}, j.spec.swarm ? h("a", { href: `#/swarms/${enc(j.spec.swarm)}` }, j.spec.swarm) : dash()),
      h("td", {}, h("a", { href: `#/backends/${enc(j.backendId)}` }, j.backendId)),
      h("td", { class: "nowrap" }, ago(j.createdAt)),
      h("td", { class: "nowrap num" }, elapsed(j)),
    ),
  )
  const heads: Head[] = [
    "Job",
    "Status",
    "Progress",
    ["Tasks", "num"],
    "Swarm",
    "Backend",
    "Created",
    ["Duration", "num"],
  ]
  return table(heads, rows, { label: "Jobs", empty })
}

function withQuery(base: string, query: URLSearchParams): string {
  const text = query.toString()
  return base + (text ? `?${text}` : "")
}

interface JobsState {
  /** Jobs to list: PageStep more with each "Show more jobs". */
  limit?: number
}

export const jobList: View<Page<Job>, JobsState> = {
  nav: "jobs",
  title: () => "Jobs",
  head(ctx) {
    const status = ctx.query.get("status") || ""
    const swarm = ctx.query.get("swarm")
    const withoutSwarm = new URLSearchParams(ctx.query)
    withoutSwarm.delete("swarm")
    return viewHead("Jobs", {
      sub: "Batch work of N tasks (shards), retried on failure and preemption.",
      actions: [
        swarm
          ? h(
              "span",
              { class: "chip" },
              "Swarm ",
              h("strong", {}, swarm),
              h(
                "a",
                { href: withQuery("#/jobs", withoutSwarm), "aria-label": "Show jobs of every swarm" },
                "✕",
              ),
            )
          : null,
        h("label", { for: "status-filter", class: "inline" }, "Status"),
        h(
          "select",
          { id: "status-filter", "data-action": "filter" },
          h("option", { value: "", selected: !status }, "All"),
          Statuses.map((s) => h("option", { value: s, selected: s === status }, s)),
        ),
      ],
    })
  },
  load({ query, state, signal }) {
    const params = new URLSearchParams({ limit: String(state.limit || PageStep) })
    for (const name of ["status", "swarm"]) {
      const value = query.get(name)
      if (value) params.set(name, value)
    }
    return api(`/v1/jobs?${params}`, { signal })
  },
  render(page, ctx) {
    const filtered = ctx.query.get("status") || ctx.query.get("swarm")
    const empty = filtered ? "No jobs match this filter." : "No jobs yet. Submit one with POST /v1/jobs."
    return [
      card("jobs", null, jobsTable(page.items, empty)),
      page.nextCursor
        ? h(
            "div",
            { class: "note", "data-key": "more" },
            h("button", { type: "button", class: "btn", "data-action": "more" }, "Show more jobs"),
          )
        : null,
    ]
  },
  actions: {
    filter(el, ctx) {
      const query = new URLSearchParams(ctx.query)
      const status = (el as HTMLSelectElement).value
      if (status) query.set("status", status)
      else query.delete("status")
      ctx.go(withQuery("#/jobs", query))
    },
    more(_el, ctx) {
      ctx.state.limit = Math.min(500, (ctx.state.limit || PageStep) + PageStep)
      ctx.refresh()
    },
  },
}
