/**
 * One job's page. Counts and progress, the tasks with their attempts (job-tasks.ts), the output tail of
 * one task, the events, and cancel (with a confirmation) for keys with the write role.
 */
import { api, idempotencyKey, isAbort, statusOf } from "./api"
import { type Child, h } from "./dom"
import { ago, badge, clock, code, dash, enc, muted, progress, resources } from "./format"
import { type TasksState, tasksTable } from "./job-tasks"
import { elapsed, statusBadges, Terminal } from "./jobs"
import { card, errorBox, kv, table, viewHead } from "./layout"
import type { Caller, Event, JobDetail, LogTail, Page } from "./types"
import type { View } from "./view"

const LogLines = 200
const EventPages = 4
const EventPageSize = 500

interface Events {
  items: Event[]
  /** More events than EventPages pages hold. */
  more: boolean
}

/** The output of one task, or why it could not be read. */
type Logs = (LogTail & { task: number }) | { task: number; error: unknown }

interface JobState extends TasksState {
  /** The events last loaded, kept while a finished job does not change. */
  events?: Events
  eventsStamp?: string
  confirmCancel?: boolean
  /** Why the last cancel failed. */
  actionError?: unknown
}

interface JobData {
  job: JobDetail
  events: Events
  logs: Logs | null
}

const canWrite = (me: Caller | null): boolean => me?.role === "write" || me?.role === "admin"

async function loadEvents(id: string, signal: AbortSignal): Promise<Events> {
  const items: Event[] = []
  let cursor: string | undefined
  for (let page = 0; page < EventPages; page++) {
    const query = `?limit=${EventPageSize}${cursor ? `&cursor=${enc(cursor)}` : ""}`
    const res = await api<Page<Event>>(`/v1/jobs/${id}/events${query}`, { signal })
    items.push(...res.items)
    cursor = res.nextCursor
    if (!cursor) break
  }
  return { items, more: Boolean(cursor) }
}

async function loadLogs(id: string, index: number, signal: AbortSignal): Promise<Logs> {
  try {
    return {
      task: index,
      ...(await api<LogTail>(`/v1/jobs/${id}/tasks/${index}/logs?tail=${LogLines}`, { signal })),
    }
  } catch (error) {
    if (isAbort(error)) throw error
    if (statusOf(error) === 401) throw error
    return { task: index, error }
  }
}

function argv(command: string[] | undefined): string {
  return (command || [])
    .map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`))
    .join(" ")
}

function overview(job: JobDetail): Child[] {
  const spec = job.spec
  return [
    h(
      "div",
      { class: "overview-progress" },
      progress(job.counts, spec.tasks, true),
      h(
        "div",
        { class: "counts", "aria-label": "Tasks per state" },
        Object.entries(job.counts)
          .filter(([, n]) => (n ?? 0) > 0)
          .map(([state, n]) => h("span", { class: "count" }, badge(state), h("strong", {}, n))),
      ),
    ),
    kv([
      ["Command", code(argv(spec.command)), true],
      // A batch job: where its rows come from and where each shard's results go.
      spec.batch ? ["Input", code(spec.batch.input)] : null,
      spec.batch ? ["Results", code(`${spec.batch.output.replace(/\/+$/, "")}/shard-<n>.jsonl`)] : null,
      ["Tasks", String(spec.tasks)],
      ["Swarm", spec.swarm ? h("a", { href: `#/swarms/${enc(spec.swarm)}` }, spec.swarm) : dash()],
      ["Backend", h("a", { href: `#/backends/${enc(job.backendId)}` }, job.backendId)],
      ["Resources per task", resources(spec.resources)],
      ["Image", spec.image || muted("backend default")],
      ["Priority", spec.priority],
      ["Retries", `${spec.maxRetriesFailure} on failure, ${spec.maxRetriesPreemption} on preemption`],
      ["Created", ago(job.createdAt)],
      [job.finishedAt ? "Finished" : "Running for", job.finishedAt ? ago(job.finishedAt) : elapsed(job)],
      job.finishedAt ? ["Took", elapsed(job)] : null,
      spec.coscheduling
        ? ["Gang", spec.coscheduling.groupBy ? `by ${spec.coscheduling.groupBy}` : "all tasks together"]
        : null,
    ]),
  ]
}

function logsHead(job: JobDetail, state: JobState): Child[] {
  return [
    "Logs",
    h("span", { class: "spacer" }),
    h("label", { for: "log-task", class: "inline" }, "Task"),
    h(
      "select",
      { id: "log-task", "data-action": "log-task" },
      job.tasks.map((t) =>
        h("option", { value: t.index, selected: t.index === state.logTask }, `${t.index} · ${t.state}`),
      ),
    ),
  ]
}

function logsBody(logs: Logs | null, state: JobState): Child {
  if (state.logTask === undefined) return h("p", { class: "empty" }, "No task to show.")
  if (!logs || logs.task !== state.logTask)
    return h("p", { class: "empty", role: "status" }, `Loading the output of task ${state.logTask}…`)
  if ("error" in logs) return errorBox(logs.error, `The output of task ${logs.task} is not available:`)
  return [
    h(
      "p",
      { class: "note" },
      `The last ${LogLines} lines of attempt `,
      logs.attemptUid ? code(logs.attemptUid) : dash(),
      logs.updatedAt ? [", updated ", ago(logs.updatedAt)] : null,
      logs.truncated ? "; older output is left out" : null,
      ".",
    ),
    h(
      "pre",
      {
        class: "logs",
        id: `log-${logs.task}`,
        "data-key": `log-${logs.task}`,
        "data-follow": "",
        tabindex: "0",
        "aria-label": `Output of task ${logs.task}`,
      },
      logs.lines.length ? logs.lines.join("\n") : h("span", { class: "muted" }, "No output yet."),
    ),
  ]
}

function entity(e: Event["entity"]): string {
  if (e.kind === "task") return `task ${e.id.split("/").pop()}`
  return e.kind
}

function eventsTable(events: Events): Child[] {
  const items = events.items.slice().reverse()
  return [
    table(
      ["Time", "Object", "Change", "Reason", "Message"],
      items.map((e) =>
        h(
          "tr",
          { "data-key": `event-${e.id}` },
          h("td", { class: "nowrap" }, clock(e.at)),
          h("td", { class: "nowrap" }, entity(e.entity)),
          h(
            "td",
            { class: "nowrap" },
            e.from ? [badge(e.from), h("span", { class: "muted", "aria-label": "to" }, " → ")] : null,
            badge(e.to),
          ),
          h("td", {}, code(e.reason)),
          h("td", { class: "msg" }, e.message || dash()),
        ),
      ),
      { label: "Events", empty: "No events yet." },
    ),
    events.more ? h("p", { class: "note" }, `Showing the first ${events.items.length} events.`) : null,
  ]
}

function focusLater(selector: string): void {
  requestAnimationFrame(() => {
    const el = document.querySelector<HTMLElement>(selector)
    if (el) el.focus()
  })
}

function cancelActions(state: JobState): HTMLElement {
  if (!state.confirmCancel)
    return h(
      "button",
      { type: "button", class: "btn danger-outline", "data-action": "ask-cancel" },
      "Cancel job",
    )
  return h(
    "span",
    { class: "confirm", role: "group", "aria-label": "Confirm cancel" },
    "Cancel this job?",
    h("button", { type: "button", class: "btn danger", "data-action": "cancel" }, "Yes, cancel it"),
    h("button", { type: "button", class: "btn", "data-action": "keep" }, "Keep running"),
  )
}

export const jobDetail: View<JobData, JobState> = {
  nav: "jobs",
  title: ({ params }) => `Job ${params[0]}`,
  head(ctx, data) {
    const job = data?.job
    const actions: Child[] = []
    if (job && canWrite(ctx.me) && !Terminal.includes(job.status) && !job.cancelRequested)
      actions.push(cancelActions(ctx.state))
    return viewHead(job ? job.spec.name : (ctx.params[0] ?? ""), {
      crumbs: [["Jobs", "#/jobs"]],
      badges: job ? statusBadges(job) : [],
      actions,
      sub: h("span", { class: "mono" }, ctx.params[0]),
    })
  },
  async load({ params, state, signal }) {
    const id = enc(params[0])
    const job = await api<JobDetail>(`/v1/jobs/${id}`, { signal })
    if (state.logTask === undefined || !job.tasks.some((t) => t.index === state.logTask))
      state.logTask = job.tasks[0]?.index
    const stamp = `${job.status} ${job.updatedAt}`
    const fresh = !state.events || !Terminal.includes(job.status) || state.eventsStamp !== stamp
    const [events, logs] = await Promise.all([
      fresh || !state.events ? loadEvents(id, signal) : state.events,
      state.logTask === undefined ? null : loadLogs(id, state.logTask, signal),
    ])
    state.events = events
    state.eventsStamp = stamp
    return { job, events, logs }
  },
  render({ job, events, logs }, ctx) {
    const state = ctx.state
    return [
      state.actionError
        ? h(
            "div",
            { class: "alert-slot", "data-key": "action-error" },
            errorBox(state.actionError, "The job was not cancelled:"),
          )
        : null,
      job.message ? h("div", { class: "alert info alert-slot", "data-key": "message" }, job.message) : null,
      job.pendingReason
        ? h(
            "div",
            { class: "alert warn alert-slot", "data-key": "pending" },
            h("strong", {}, "Waiting to be placed: "),
            job.pendingReason,
          )
        : null,
      card("overview", "Overview", overview(job)),
      card(
        "tasks",
        ["Tasks", h("span", { class: "card-note" }, `${job.tasks.length} of ${job.spec.tasks}`)],
        tasksTable(job, state),
        job.tasksNextCursor
          ? h("p", { class: "note" }, `Showing the first ${job.tasks.length} tasks.`)
          : null,
      ),
      card("logs", logsHead(job, state), logsBody(logs, state)),
      card("events", ["Events", h("span", { class: "card-note" }, "newest first")], eventsTable(events)),
    ]
  },
  actions: {
    toggle(el, ctx) {
      const index = Number(el.dataset.task)
      ctx.state.expanded ||= new Set()
      const expanded = ctx.state.expanded
      if (expanded.has(index)) expanded.delete(index)
      else expanded.add(index)
      ctx.rerender()
    },
    logs(el, ctx) {
      ctx.state.logTask = Number(el.dataset.task)
      ctx.rerender()
      ctx.refresh()
      const panel = document.getElementById("logs")
      if (panel) panel.scrollIntoView({ block: "nearest" })
    },
    "log-task"(el, ctx) {
      ctx.state.logTask = Number((el as HTMLSelectElement).value)
      ctx.rerender()
      ctx.refresh()
    },
    "ask-cancel"(_el, ctx) {
      ctx.state.confirmCancel = true
      ctx.state.actionError = null
      ctx.rerender()
      focusLater('[data-action="cancel"]')
    },
    keep(_el, ctx) {
      ctx.state.confirmCancel = false
      ctx.rerender()
      focusLater('[data-action="ask-cancel"]')
    },
    async cancel(el, ctx) {
      const button = el as HTMLButtonElement
      button.disabled = true
      try {
        await api(`/v1/jobs/${enc(ctx.params[0])}/cancel`, {
          method: "POST",
          headers: { "Idempotency-Key": idempotencyKey() },
        })
        ctx.state.actionError = null
      } catch (error) {
        ctx.state.actionError = error
      }
      ctx.state.confirmCancel = false
      ctx.refresh()
    },
  },
}
