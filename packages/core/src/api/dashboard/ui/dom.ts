/**
 * Element builders and in-place updates. Views build elements from text only, never HTML strings, so
 * data from the API cannot inject markup; `morphChildren` then updates the page in place, keeping
 * focus, scroll positions and form state across refreshes.
 */
const SvgNs = "http://www.w3.org/2000/svg"

/** What a builder takes as a child: nodes and text; null, undefined and false are left out. */
export type Child = Node | string | number | null | undefined | false | readonly Child[]

type Token = string | null | undefined | false

/** Attributes: a list is joined with spaces (falsy items left out); true is present, null or false absent. */
export type Props = Record<string, string | number | boolean | null | undefined | readonly Token[]>

function setProps(el: Element, props: Props | undefined): void {
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue
    const text = Array.isArray(value) ? value.filter(Boolean).join(" ") : value === true ? "" : String(value)
    el.setAttribute(name, text)
  }
}

function addChildren(el: Element, children: readonly Child[]): void {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue
    if (Array.isArray(child)) addChildren(el, child)
    else el.append(child instanceof Node ? child : String(child))
  }
}

/** An element with attributes (no event handlers: views act through data-action attributes). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props?: Props,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag)
  setProps(el, props)
  addChildren(el, children)
  return el
}

/** An SVG element. */
export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  props?: Props,
  ...children: Child[]
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SvgNs, tag)
  setProps(el, props)
  addChildren(el, children)
  return el
}

// In-place updates ----------------------------------------------------------------------------

const keyOf = (node: Node): string | null => (node instanceof Element ? node.getAttribute("data-key") : null)

function sameKind(a: Node, b: Node): boolean {
  return (
    a.nodeType === b.nodeType &&
    a.nodeName === b.nodeName &&
    keyOf(a) === keyOf(b) &&
    (a.nodeName !== "INPUT" || (a as Element).getAttribute("type") === (b as Element).getAttribute("type"))
  )
}

/** Make prev look like next, which sameKind has matched to it. */
function morph(prev: Node, next: Node): void {
  if (!(prev instanceof Element) || !(next instanceof Element)) {
    if (prev.nodeValue !== next.nodeValue) prev.nodeValue = next.nodeValue
    return
  }
  const value = next instanceof HTMLSelectElement ? next.value : undefined
  for (const { name } of Array.from(prev.attributes)) if (!next.hasAttribute(name)) prev.removeAttribute(name)
  for (const { name, value: v } of Array.from(next.attributes))
    if (prev.getAttribute(name) !== v) prev.setAttribute(name, v)
  morphChildren(prev, Array.from(next.childNodes))
  if (value !== undefined && prev instanceof HTMLSelectElement && prev.value !== value) prev.value = value
}

/**
 * Make parent's children look like next, reusing the existing nodes where they match (by data-key,
 * else by position among the unkeyed ones): focus, scroll, selection and open rows survive a refresh.
 */
export function morphChildren(parent: Node, next: readonly Node[]): void {
  const old = Array.from(parent.childNodes)
  const keyed = new Map<string, ChildNode>()
  const loose: ChildNode[] = []
  for (const node of old) {
    const key = keyOf(node)
    if (key) keyed.set(key, node)
    else loose.push(node)
  }
  const kept = new Set<Node>()
  let li = 0
  const result = next.map((node) => {
    const key = keyOf(node)
    const prev = key ? keyed.get(key) : loose[li++]
    if (!prev || kept.has(prev) || !sameKind(prev, node)) return node
    kept.add(prev)
    morph(prev, node)
    return prev
  })
  for (const node of old) if (!kept.has(node)) node.remove()
  let cursor = parent.firstChild
  for (const node of result) {
    if (node === cursor) cursor = cursor.nextSibling
    else parent.insertBefore(node, cursor)
  }
}
