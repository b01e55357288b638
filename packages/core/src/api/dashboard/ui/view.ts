/**
 * What a view is: an object the app mounts for a route. `load` fetches its data (again at every
 * refresh), `head` and `render` turn it into nodes that the app morphs into the page, and `actions`
 * handle clicks (buttons) and changes (selects, inputs) on elements with a matching `data-action`.
 */
import type { Caller } from "./types"

/** What a view is given: the route's parameters, its query, its state and the app's controls. */
export interface Context<S> {
  /** The route's captures, URI-decoded (`#/jobs/ID` → ["ID"]). */
  params: string[]
  /** The hash's query (`#/jobs?status=FAILED`). */
  query: URLSearchParams
  /** Per-page UI state (expanded rows, chosen log task, page size), kept while the tab lives. */
  state: S
  me: Caller | null
  /** Draw again from the data in hand. */
  rerender(): void
  /** Load again now, then draw. */
  refresh(): Promise<void>
  /** Go to another hash route. */
  go(hash: string): void
}

export interface LoadContext<S> extends Context<S> {
  /** Aborted when the view is left or a newer refresh starts. */
  signal: AbortSignal
}

export type Action<S> = (el: HTMLElement, ctx: Context<S>) => void | Promise<void>

/** A page of the dashboard; D is what `load` resolves with, S its UI state (every field optional). */
export interface View<D, S = object> {
  /** The `data-nav` of the section link to mark current. */
  nav: string
  title(ctx: Context<S>): string
  /** The title area, drawn before the data is in (then data is undefined). */
  head(ctx: Context<S>, data: D | undefined): Node
  load(ctx: LoadContext<S>): Promise<D>
  /** The view's nodes below the head; null items are left out. */
  render(data: D, ctx: Context<S>): (Node | null)[]
  actions?: Record<string, Action<S>>
}
