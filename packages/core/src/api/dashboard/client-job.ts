/**
 * Browser module `/ui/job.js`: one job's page. Counts and progress, the tasks with their attempts (rows
 * expand and stay expanded across refreshes), the output tail of one task, the events, and cancel (with a
 * confirmation) for keys with the write role.
 */
export const jobJs = String.raw`/* swarmplane dashboard: one job. */
import { api, idempotencyKey } from "./api.js"
import {
  ago,
  badge,
  card,
  clock,
  code,
  dash,
  duration,
  enc,
  errorBox,
  h,
  kv,
  muted,
  progress,
  resources,
  table,
  viewHead,
} from "./dom.js"
import { elapsed, statusBadges, Terminal } from "./jobs.js"

const LogTail = 200
const EventPages = 4
const EventPageSize = 500

const canWrite = (me) => Boolean(me) && (me.role === "write" || me.role === "admin")

async function loadEvents(id, signal) {
  const items = []
  let cursor
  for (let page = 0; page < EventPages; page++) {
    const query = "?limit=" + EventPageSize + (cursor ? "&cursor=" + enc(cursor) : "")
    const res = await api("/v1/jobs/" + id + "/events" + query, { signal })
    items.push(...res.items)
    cursor = res.nextCursor
    if (!cursor) break
  }
  return { items, more: Boolean(cursor) }
}

async function loadLogs(id, index, signal) {
  try {
    return { task: index, ...(await api("/v1/jobs/" + id + "/tasks/" + index + "/logs?tail=" + LogTail, { signal })) }
  } catch (error) {
    if (error && error.name === "AbortError") throw error
    if (error && error.status === 401) throw error
    return { task: index, error }
  }
}

function argv(command) {
  return (command || []).map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : "'" + a.replaceAll("'", "'\\''") + "'")).join(" ")
}

function overview(job) {
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
          .filter(([, n]) => n > 0)
          .map(([state, n]) => h("span", { class: "count" }, badge(state), h("strong", {}, n))),
      ),
    ),
    kv([
      ["Command", code(argv(spec.command)), true],
      // A batch job: where its rows come from and where each shard's results go.
      spec.batch ? ["Input", code(spec.batch.input)] : null,
      spec.batch ? ["Results", code(spec.batch.output.replace(/\/+$/, "") + "/shard-<n>.jsonl")] : null,
      ["Tasks", String(spec.tasks)],
      ["Swarm", spec.swarm ? h("a", { href: "#/swarms/" + enc(spec.swarm) }, spec.swarm) : dash()],
      ["Backend", h("a", { href: "#/backends/" + enc(job.backendId) }, job.backendId)],
      ["Resources per task", resources(spec.resources)],
      ["Image", spec.image || muted("backend default")],
      ["Priority", spec.priority],
      ["Retries", spec.maxRetriesFailure + " on failure, " + spec.maxRetriesPreemption + " on preemption"],
      ["Created", ago(job.createdAt)],
      [job.finishedAt ? "Finished" : "Running for", job.finishedAt ? ago(job.finishedAt) : elapsed(job)],
      job.finishedAt ? ["Took", elapsed(job)] : null,
      spec.coscheduling ? ["Gang", spec.coscheduling.groupBy ? "by " + spec.coscheduling.groupBy : "all tasks together"] : null,
    ]),
  ]
}

function attemptsTable(task) {
  const last = task.attempts.length - 1
  return table(
    [["#", "num idx"], "Attempt", "State", ["Exit", "num"], "Reason", "Worker", "Created", "Started", "Finished", ["Ran", "num"]],
    task.attempts.map((a, i) =>
      h(
        "tr",
        { "data-key": "attempt-" + a.attemptUid },
        h("td", { class: "num idx" }, i + 1),
        h("td", {}, code(a.attemptUid), i === last ? [" ", muted("current")] : null),
        h("td", {}, badge(a.state)),
        h("td", { class: "num" }, a.exitCode ?? dash()),
        h("td", {}, a.reason || dash(), a.message ? [" ", muted(a.message)] : null),
        h("td", {}, a.workerId || a.target || dash()),
        h("td", { class: "nowrap" }, clock(a.createdAt)),
        h("td", { class: "nowrap" }, clock(a.startedAt)),
        h("td", { class: "nowrap" }, clock(a.finishedAt)),
        h("td", { class: "num nowrap" }, a.startedAt ? duration((a.finishedAt ? Date.parse(a.finishedAt) : Date.now()) - Date.parse(a.startedAt)) : dash()),
      ),
    ),
    { cls: "compact", label: "Attempts of task " + task.index },
  )
}

/** A batch shard's rows, from its latest attempt: "done/total", then failures and retries if any. */
function rowsText(progress) {
  if (!progress) return dash()
  let text = progress.done + "/" + (progress.total === undefined ? "?" : progress.total)
  if (progress.failed) text += " · " + progress.failed + " failed"
  if (progress.retries) text += " · " + progress.retries + " retries"
  return text
}

function tasksTable(job, state) {
  const expanded = state.expanded || new Set()
  // Batch jobs: a Rows column, when any attempt reports what it did.
  const batch = job.tasks.some((t) => t.attempts.some((a) => a.progress))
  const columns = 7 + (batch ? 1 : 0)
  const rows = []
  for (const t of job.tasks) {
    const last = t.attempts[t.attempts.length - 1]
    const open = expanded.has(t.index) && t.attempts.length > 0
    rows.push(
      h(
        "tr",
        { "data-key": "task-" + t.index, class: open ? "open" : null },
        h("td", { class: "num idx" }, t.index),
        h("td", {}, badge(t.state)),
        h("td", { class: "num" }, t.attempts.length),
        h("td", { class: "num" }, last && last.exitCode !== undefined ? last.exitCode : dash()),
        batch ? h("td", { class: "num nowrap" }, rowsText(last && last.progress)) : null,
        h("td", {}, (last && (last.workerId || last.target)) || dash()),
        h("td", { class: "msg" }, t.pendingReason || dash()),
        h(
          "td",
          { class: "row-actions" },
          h(
            "button",
            {
              type: "button",
              class: "btn small",
              "data-action": "toggle",
              "data-task": t.index,
              "aria-expanded": String(open),
              "aria-controls": open ? "attempts-" + t.index : null,
              "aria-label": (open ? "Hide" : "Show") + " the attempts of task " + t.index,
              disabled: !t.attempts.length,
            },
            open ? "Hide attempts" : "Attempts",
          ),
          h(
            "button",
            {
              type: "button",
              class: "btn small",
              "data-action": "logs",
              "data-task": t.index,
              "aria-pressed": String(state.logTask === t.index),
              "aria-label": "Show the output of task " + t.index,
            },
            "Logs",
          ),
        ),
      ),
    )
    if (open)
      rows.push(
        h("tr", { "data-key": "attempts-" + t.index, id: "attempts-" + t.index, class: "attempts-row" }, h("td", { colspan: columns }, attemptsTable(t))),
      )
  }
  const head = [["#", "num idx"], "State", ["Attempts", "num"], ["Exit", "num"], "Worker", "Pending reason", ""]
  if (batch) head.splice(4, 0, ["Rows", "num"])
  return table(head, rows, {
    label: "Tasks",
    empty: "This job has no tasks yet.",
  })
}

function logsHead(job, state) {
  return [
    "Logs",
    h("span", { class: "spacer" }),
    h("label", { for: "log-task", class: "inline" }, "Task"),
    h(
      "select",
      { id: "log-task", "data-action": "log-task" },
      job.tasks.map((t) => h("option", { value: t.index, selected: t.index === state.logTask }, t.index + " · " + t.state)),
    ),
  ]
}

function logsBody(logs, state) {
  if (state.logTask === undefined) return h("p", { class: "empty" }, "No task to show.")
  if (!logs || logs.task !== state.logTask) return h("p", { class: "empty", role: "status" }, "Loading the output of task " + state.logTask + "…")
  if (logs.error) return errorBox(logs.error, "The output of task " + logs.task + " is not available:")
  return [
    h(
      "p",
      { class: "note" },
      "The last " + LogTail + " lines of attempt ",
      logs.attemptUid ? code(logs.attemptUid) : dash(),
      logs.updatedAt ? [", updated ", ago(logs.updatedAt)] : null,
      logs.truncated ? "; older output is left out" : null,
      ".",
    ),
    h(
      "pre",
      { class: "logs", id: "log-" + logs.task, "data-key": "log-" + logs.task, "data-follow": "", tabindex: "0", "aria-label": "Output of task " + logs.task },
      logs.lines.length ? logs.lines.join("\n") : h("span", { class: "muted" }, "No output yet."),
    ),
  ]
}

function entity(e) {
  if (e.kind === "task") return "task " + e.id.split("/").pop()
  return e.kind
}

function eventsTable(events) {
  const items = events.items.slice().reverse()
  return [
    table(
      ["Time", "Object", "Change", "Reason", "Message"],
      items.map((e) =>
        h(
          "tr",
          { "data-key": "event-" + e.id },
          h("td", { class: "nowrap" }, clock(e.at)),
          h("td", { class: "nowrap" }, entity(e.entity)),
          h("td", { class: "nowrap" }, e.from ? [badge(e.from), h("span", { class: "muted", "aria-label": "to" }, " → ")] : null, badge(e.to)),
          h("td", {}, code(e.reason)),
          h("td", { class: "msg" }, e.message || dash()),
        ),
      ),
      { label: "Events", empty: "No events yet." },
    ),
    events.more ? h("p", { class: "note" }, "Showing the first " + events.items.length + " events.") : null,
  ]
}

function focusLater(selector) {
  requestAnimationFrame(() => {
    const el = document.querySelector(selector)
    if (el) el.focus()
  })
}

export const jobDetail = {
  nav: "jobs",
  title: ({ params }) => "Job " + params[0],
  head(ctx, data) {
    const job = data && data.job
    const actions = []
    if (job && canWrite(ctx.me) && !Terminal.includes(job.status) && !job.cancelRequested) {
      if (ctx.state.confirmCancel)
        actions.push(
          h(
            "span",
            { class: "confirm", role: "group", "aria-label": "Confirm cancel" },
            "Cancel this job?",
            h("button", { type: "button", class: "btn danger", "data-action": "cancel" }, "Yes, cancel it"),
            h("button", { type: "button", class: "btn", "data-action": "keep" }, "Keep running"),
          ),
        )
      else actions.push(h("button", { type: "button", class: "btn danger-outline", "data-action": "ask-cancel" }, "Cancel job"))
    }
    return viewHead(job ? job.spec.name : ctx.params[0], {
      crumbs: [["Jobs", "#/jobs"]],
      badges: job ? statusBadges(job) : [],
      actions,
      sub: h("span", { class: "mono" }, ctx.params[0]),
    })
  },
  async load({ params, state, signal }) {
    const id = enc(params[0])
    const job = await api("/v1/jobs/" + id, { signal })
    if (state.logTask === undefined || !job.tasks.some((t) => t.index === state.logTask))
      state.logTask = job.tasks.length ? job.tasks[0].index : undefined
    const stamp = job.status + " " + job.updatedAt
    const fresh = !state.events || !Terminal.includes(job.status) || state.eventsStamp !== stamp
    const [events, logs] = await Promise.all([
      fresh ? loadEvents(id, signal) : state.events,
      state.logTask === undefined ? null : loadLogs(id, state.logTask, signal),
    ])
    state.events = events
    state.eventsStamp = stamp
    return { job, events, logs }
  },
  render({ job, events, logs }, ctx) {
    const state = ctx.state
    return [
      state.actionError ? h("div", { class: "alert-slot", "data-key": "action-error" }, errorBox(state.actionError, "The job was not cancelled:")) : null,
      job.message ? h("div", { class: "alert info alert-slot", "data-key": "message" }, job.message) : null,
      job.pendingReason
        ? h("div", { class: "alert warn alert-slot", "data-key": "pending" }, h("strong", {}, "Waiting to be placed: "), job.pendingReason)
        : null,
      card("overview", "Overview", overview(job)),
      card(
        "tasks",
        ["Tasks", h("span", { class: "card-note" }, job.tasks.length + " of " + job.spec.tasks)],
        tasksTable(job, state),
        job.tasksNextCursor ? h("p", { class: "note" }, "Showing the first " + job.tasks.length + " tasks.") : null,
      ),
      card("logs", logsHead(job, state), logsBody(logs, state)),
      card("events", ["Events", h("span", { class: "card-note" }, "newest first")], eventsTable(events)),
    ]
  },
  actions: {
    toggle(el, ctx) {
      const index = Number(el.dataset.task)
      const expanded = (ctx.state.expanded ||= new Set())
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
      ctx.state.logTask = Number(el.value)
      ctx.rerender()
      ctx.refresh()
    },
    "ask-cancel"(el, ctx) {
      ctx.state.confirmCancel = true
      ctx.state.actionError = null
      ctx.rerender()
      focusLater('[data-action="cancel"]')
    },
    keep(el, ctx) {
      ctx.state.confirmCancel = false
      ctx.rerender()
      focusLater('[data-action="ask-cancel"]')
    },
    async cancel(el, ctx) {
      el.disabled = true
      try {
        await api("/v1/jobs/" + enc(ctx.params[0]) + "/cancel", { method: "POST", headers: { "Idempotency-Key": idempotencyKey() } })
        ctx.state.actionError = null
      } catch (error) {
        ctx.state.actionError = error
      }
      ctx.state.confirmCancel = false
      ctx.refresh()
    },
  },
}
`
