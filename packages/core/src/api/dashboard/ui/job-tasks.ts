/**
 * A job's tasks table: one row per task with its state, attempts, exit code, (batch jobs) rows done,
 * worker and pending reason; a task's attempts open in a row below it and stay open across refreshes.
 */
import { h } from "./dom"
import { badge, clock, code, dash, duration, muted } from "./format"
import { type Head, table } from "./layout"
import type { Attempt, JobDetail, Task } from "./types"

/** What the tasks table reads of the job page's state. */
export interface TasksState {
  /** Tasks whose attempts are shown. */
  expanded?: Set<number>
  /** The task whose output the logs card shows. */
  logTask?: number
}

function ran(a: Attempt): string | HTMLElement {
  if (!a.startedAt) return dash()
  return duration((a.finishedAt ? Date.parse(a.finishedAt) : Date.now()) - Date.parse(a.startedAt))
}

function attemptsTable(task: Task): HTMLElement {
  const last = task.attempts.length - 1
  const heads: Head[] = [
    ["#", "num idx"],
    "Attempt",
    "State",
    ["Exit", "num"],
    "Reason",
    "Worker",
    "Created",
    "Started",
    "Finished",
    ["Ran", "num"],
  ]
  return table(
    heads,
    task.attempts.map((a, i) =>
      h(
        "tr",
        { "data-key": `attempt-${a.attemptUid}` },
        h("td", { class: "num idx" }, i + 1),
        h("td", {}, code(a.attemptUid), i === last ? [" ", muted("current")] : null),
        h("td", {}, badge(a.state)),
        h("td", { class: "num" }, a.exitCode ?? dash()),
        h("td", {}, a.reason || dash(), a.message ? [" ", muted(a.message)] : null),
        h("td", {}, a.workerId || a.target || dash()),
        h("td", { class: "nowrap" }, clock(a.createdAt)),
        h("td", { class: "nowrap" }, clock(a.startedAt)),
        h("td", { class: "nowrap" }, clock(a.finishedAt)),
        h("td", { class: "num nowrap" }, ran(a)),
      ),
    ),
    { cls: "compact", label: `Attempts of task ${task.index}` },
  )
}

/** A batch shard's rows, from its latest attempt: "done/total", then failures and retries if any. */
function rowsText(progress: Attempt["progress"]): string | HTMLElement {
  if (!progress) return dash()
  let text = `${progress.done}/${progress.total === undefined ? "?" : progress.total}`
  if (progress.failed) text += ` · ${progress.failed} failed`
  if (progress.retries) text += ` · ${progress.retries} retries`
  return text
}

function taskButtons(t: Task, open: boolean, state: TasksState): HTMLElement {
  return h(
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
        "aria-controls": open ? `attempts-${t.index}` : null,
        "aria-label": `${open ? "Hide" : "Show"} the attempts of task ${t.index}`,
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
        "aria-label": `Show the output of task ${t.index}`,
      },
      "Logs",
    ),
  )
}

export function tasksTable(job: JobDetail, state: TasksState): HTMLElement {
  const expanded = state.expanded || new Set()
  // Batch jobs: a Rows column, when any attempt reports what it did.
  const batch = job.tasks.some((t) => t.attempts.some((a) => a.progress))
  const columns = 7 + (batch ? 1 : 0)
  const rows: HTMLElement[] = []
  for (const t of job.tasks) {
    const last = t.attempts[t.attempts.length - 1]
    const open = expanded.has(t.index) && t.attempts.length > 0
    rows.push(
      h(
        "tr",
        { "data-key": `task-${t.index}`, class: open ? "open" : null },
        h("td", { class: "num idx" }, t.index),
        h("td", {}, badge(t.state)),
        h("td", { class: "num" }, t.attempts.length),
        h("td", { class: "num" }, last && last.exitCode !== undefined ? last.exitCode : dash()),
        batch ? h("td", { class: "num nowrap" }, rowsText(last?.progress)) : null,
        h("td", {}, (last && (last.workerId || last.target)) || dash()),
        h("td", { class: "msg" }, t.pendingReason || dash()),
        taskButtons(t, open, state),
      ),
    )
    if (open)
      rows.push(
        h(
          "tr",
          { "data-key": `attempts-${t.index}`, id: `attempts-${t.index}`, class: "attempts-row" },
          h("td", { colspan: columns }, attemptsTable(t)),
        ),
      )
  }
  const head: Head[] = [
    ["#", "num idx"],
    "State",
    ["Attempts", "num"],
    ["Exit", "num"],
    "Worker",
    "Pending reason",
    "",
  ]
  if (batch) head.splice(4, 0, ["Rows", "num"])
  return table(head, rows, {
    label: "Tasks",
    empty: "This job has no tasks yet.",
  })
}
