/**
 * The dashboard's entry (bundled to `/ui/app.js`): sign-in against `GET /v1/me`, hash routing
 * (`#/swarms`, `#/jobs/ID`, ...), and a refresh loop that reloads the current view every few seconds
 * (paused while the tab is hidden) and updates the page in place, so the reader's place, focus and
 * expanded rows survive. Views are objects `{ nav, title, head, load, render, actions }` (view.ts).
 */
import { api, messageOf, session, statusOf } from "./api"
import { backendDetail, backendList } from "./backends"
import { h, morphChildren } from "./dom"
import { clustersView, workersView } from "./infra"
import { jobDetail } from "./job"
import { jobList } from "./jobs"
import { card, errorBox, viewHead } from "./layout"
import { swarmDetail, swarmList } from "./swarms"
import type { Caller } from "./types"
import type { Context, View } from "./view"

const RefreshMs = 3000
const Home = "#/swarms"

/** Any view: the app hands each its own data and state back, so their types do not matter here. */
type AnyView = View<unknown, object>

const routes: [RegExp, AnyView][] = [
  [/^\/swarms\/?$/, swarmList],
  [/^\/swarms\/([^/]+)$/, swarmDetail],
  [/^\/jobs\/?$/, jobList],
  [/^\/jobs\/([^/]+)$/, jobDetail],
  [/^\/workers\/?$/, workersView],
  [/^\/clusters\/?$/, clustersView],
  [/^\/backends\/?$/, backendList],
  [/^\/backends\/([^/]+)$/, backendDetail],
]

const notFound: View<null> = {
  nav: "",
  title: () => "Not found",
  head: () => viewHead("Not found"),
  load: async () => null,
  render: () => [
    card(
      "not-found",
      null,
      h("p", {}, "There is no such page. ", h("a", { href: Home }, "Go to the swarms.")),
    ),
  ],
}

const byId = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T
const ui = {
  topbar: byId("topbar"),
  signin: byId("signin"),
  form: byId<HTMLFormElement>("signin-form"),
  key: byId<HTMLInputElement>("key"),
  message: byId("signin-message"),
  submit: byId<HTMLButtonElement>("signin-submit"),
  view: byId("view"),
  region: byId("region"),
  who: byId("who"),
  auto: byId<HTMLInputElement>("auto"),
  live: byId("live"),
  liveText: byId("live-text"),
  refreshNow: byId("refresh-now"),
  signout: byId("signout"),
}

/** The view on screen: its route, its data once loaded, the error of the last load, the load in flight. */
interface Mounted {
  def: AnyView
  path: string
  params: string[]
  query: URLSearchParams
  state: object
  data: unknown
  error: unknown
  ctl: AbortController | undefined
}

/** Per-page UI state (expanded rows, chosen log task, page size), kept while the tab lives. */
const states = new Map<string, object>()
let me: Caller | null = null
let current: Mounted | null = null
let timer = 0
let focusHeading = false

function context(view: Mounted): Context<object> {
  return {
    params: view.params,
    query: view.query,
    state: view.state,
    me,
    rerender: draw,
    refresh,
    go: (hash) => {
      location.hash = hash
    },
  }
}

// Sign-in ---------------------------------------------------------------------------------------

function setMessage(text?: string, tone?: string): void {
  ui.message.hidden = !text
  ui.message.className = `alert ${tone || "error"}`
  ui.message.textContent = text || ""
}

function showSignin(text?: string, tone?: string): void {
  stop()
  me = null
  current = null
  states.clear()
  ui.region.replaceChildren()
  ui.topbar.hidden = true
  ui.view.hidden = true
  ui.signin.hidden = false
  document.title = "Sign in · swarmplane"
  setMessage(text, tone)
  ui.key.focus()
}

function enter(who: Caller): void {
  me = who
  ui.who.replaceChildren(
    h("span", { class: "muted" }, "Project"),
    h("strong", {}, who.project),
    h("span", { class: "badge plain idle", title: "Role of this key" }, who.role),
  )
  ui.signin.hidden = true
  ui.topbar.hidden = false
  ui.view.hidden = false
  setMessage("")
  if (!location.hash || location.hash === "#" || location.hash === "#/") history.replaceState(null, "", Home)
  route()
}

async function signIn(event: SubmitEvent): Promise<void> {
  event.preventDefault()
  const key = ui.key.value.trim()
  if (!key) return setMessage("Enter an API key.")
  if (!/^[\x21-\x7e]+$/.test(key))
    return setMessage("That is not an API key: keys are printable characters without spaces.")
  ui.submit.disabled = true
  ui.submit.textContent = "Signing in…"
  setMessage("")
  try {
    const who = await api<Caller>("/v1/me", { key })
    session.save(key)
    ui.key.value = ""
    enter(who)
  } catch (error) {
    const what = statusOf(error) === 401 ? "Not signed in: " : "Could not sign in: "
    setMessage(what + messageOf(error))
    ui.key.select()
  } finally {
    ui.submit.disabled = false
    ui.submit.textContent = "Sign in"
  }
}

function signOut(): void {
  session.clear()
  showSignin("Signed out. The key was removed from this tab.", "ok")
}

// Routing ---------------------------------------------------------------------------------------

/** Show the view the hash names; a new view (not a new filter of the same one) takes the focus to its heading. */
function route(fromLink?: boolean): void {
  if (!me) return
  const raw = location.hash.replace(/^#/, "") || Home.slice(1)
  const cut = raw.indexOf("?")
  const path = cut < 0 ? raw : raw.slice(0, cut)
  const query = new URLSearchParams(cut < 0 ? "" : raw.slice(cut + 1))
  for (const [pattern, def] of routes) {
    const match = pattern.exec(path)
    if (!match) continue
    let params: string[]
    try {
      params = match.slice(1).map(decodeURIComponent)
    } catch {
      break
    }
    if (current && current.def === def && current.path === path) {
      current.query = query
      draw()
      refresh()
      return
    }
    focusHeading = Boolean(fromLink)
    mount(def, path, params, query)
    return
  }
  focusHeading = Boolean(fromLink)
  mount(notFound, path, [], query)
}

function mount(def: AnyView, path: string, params: string[], query: URLSearchParams): void {
  if (current?.ctl) current.ctl.abort()
  const state = states.get(path) ?? {}
  states.set(path, state)
  current = { def, path, params, query, state, data: undefined, error: undefined, ctl: undefined }
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (link.getAttribute("data-nav") === def.nav) link.setAttribute("aria-current", "page")
    else link.removeAttribute("aria-current")
  }
  document.title = `${def.title(context(current))} · swarmplane`
  ui.region.replaceChildren()
  window.scrollTo(0, 0)
  draw()
  refresh()
}

// Drawing and refreshing ------------------------------------------------------------------------

function draw(): void {
  const view = current
  if (!view) return
  const ctx = context(view)
  const nodes: (Node | null)[] = [view.def.head(ctx, view.data)]
  if (view.error) {
    const what =
      view.data === undefined
        ? "Could not load this page:"
        : "Could not refresh, showing what was last loaded:"
    nodes.push(h("div", { class: "alert-slot", "data-key": "error" }, errorBox(view.error, what)))
  }
  if (view.data !== undefined) nodes.push(...view.def.render(view.data, ctx))
  else if (!view.error)
    nodes.push(h("p", { class: "loading", role: "status", "data-key": "loading" }, "Loading…"))
  const following = new Map<string, boolean>()
  for (const pre of ui.region.querySelectorAll("[data-follow]"))
    following.set(pre.id, pre.scrollHeight - pre.scrollTop - pre.clientHeight < 8)
  morphChildren(
    ui.region,
    nodes.filter((node): node is Node => Boolean(node)),
  )
  for (const pre of ui.region.querySelectorAll("[data-follow]"))
    if (following.get(pre.id) !== false) pre.scrollTop = pre.scrollHeight
  if (focusHeading && view.data !== undefined) {
    focusHeading = false
    const heading = ui.region.querySelector("h1")
    if (heading) heading.focus({ preventScroll: true })
  }
}

function setLive(tone: string, text: string): void {
  ui.live.className = `live ${tone}`
  ui.liveText.textContent = text
}

function stop(): void {
  clearTimeout(timer)
  if (current?.ctl) current.ctl.abort()
}

function schedule(): void {
  clearTimeout(timer)
  if (current && ui.auto.checked && !document.hidden) timer = window.setTimeout(refresh, RefreshMs)
}

async function refresh(): Promise<void> {
  clearTimeout(timer)
  const view = current
  if (!view || !me) return
  if (view.ctl) view.ctl.abort()
  const ctl = new AbortController()
  view.ctl = ctl
  ui.live.classList.add("busy")
  try {
    const data = await view.def.load({ ...context(view), signal: ctl.signal })
    if (view !== current || ctl.signal.aborted) return
    view.data = data
    view.error = undefined
    setLive(ui.auto.checked ? "on" : "off", `Updated ${new Date().toLocaleTimeString()}`)
  } catch (error) {
    if (view !== current || ctl.signal.aborted) return
    if (statusOf(error) === 401) {
      session.clear()
      return showSignin(`Signed out: ${messageOf(error)}`)
    }
    view.error = error
    setLive("error", `Refresh failed ${new Date().toLocaleTimeString()}`)
  }
  draw()
  schedule()
}

// Events ----------------------------------------------------------------------------------------

function act(event: Event): void {
  const el = event.target instanceof Element ? event.target.closest<HTMLElement>("[data-action]") : null
  if (!el || !current?.def.actions) return
  const field = el.tagName === "SELECT" || el.tagName === "INPUT"
  if (field !== (event.type === "change")) return
  const handler = current.def.actions[el.getAttribute("data-action") ?? ""]
  if (!handler) return
  event.preventDefault()
  handler(el, context(current))
}

ui.form.addEventListener("submit", signIn)
ui.signout.addEventListener("click", signOut)
ui.refreshNow.addEventListener("click", () => refresh())
ui.auto.addEventListener("change", () => {
  if (ui.auto.checked) refresh()
  else {
    clearTimeout(timer)
    setLive("off", "Auto-refresh is off")
  }
})
ui.region.addEventListener("click", act)
ui.region.addEventListener("change", act)
window.addEventListener("hashchange", () => route(true))
document.addEventListener("visibilitychange", () => {
  if (document.hidden) clearTimeout(timer)
  else if (current && ui.auto.checked) refresh()
})

async function boot(): Promise<void> {
  const key = session.key
  if (!key) return showSignin()
  try {
    enter(await api<Caller>("/v1/me", { key }))
  } catch (error) {
    const unauthorized = statusOf(error) === 401
    if (unauthorized) session.clear()
    showSignin(
      unauthorized
        ? `Your key is no longer accepted: ${messageOf(error)}`
        : `Could not reach the control plane: ${messageOf(error)}`,
    )
  }
}

boot()
