import { spawnSync } from "node:child_process"
import { join } from "node:path"
import { describe, expect, test } from "vitest"
import { testApi } from "../testing"
import { uiAssets } from "./assets"

const root = join(import.meta.dirname, "..", "..", "..", "..", "..")

describe("the dashboard is served without a key", () => {
  test("GET / is the HTML page with a strict CSP, loading only same-origin files", async () => {
    const api = await testApi()
    const writes = api.store.writes()
    const res = await api.call("GET", "/", { key: null })
    expect(res.status).toBe(200)
    expect(res.headers.get("content-type")).toMatch(/^text\/html/)
    const csp = res.headers.get("content-security-policy") ?? ""
    expect(csp).toContain("default-src 'self'")
    expect(csp).toContain("object-src 'none'")
    expect(csp).not.toContain("unsafe-inline")
    expect(res.headers.get("x-content-type-options")).toBe("nosniff")
    expect(res.headers.get("cache-control")).toBe("no-cache")
    expect(res.text).toContain('<script type="module" src="/ui/app.js"></script>')
    // No inline script or style, and every src/href stays on this origin.
    expect(res.text).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/)
    expect(res.text).not.toMatch(/<style|\sstyle=/)
    for (const [, url] of res.text.matchAll(/\s(?:src|href|action)="([^"]*)"/g)) expect(url).toMatch(/^[/#]/)
    expect(api.store.writes()).toBe(writes)
  })

  const files = {
    "app.js": /^text\/javascript/,
    "style.css": /^text\/css/,
    "icon.svg": /^image\/svg\+xml/,
  }
  for (const [name, type] of Object.entries(files))
    test(`GET /ui/${name} has its content type, an ETag and the CSP`, async () => {
      const api = await testApi()
      const res = await api.call("GET", `/ui/${name}`, { key: null })
      expect(res.status).toBe(200)
      expect(res.headers.get("content-type")).toMatch(type)
      expect(res.headers.get("content-security-policy")).toContain("default-src 'self'")
      expect(res.headers.get("etag")).toMatch(/^"[\w-]+"$/)
    })

  test("a browser holding the current version gets a 304", async () => {
    const api = await testApi()
    const first = await api.call("GET", "/ui/app.js", { key: null })
    const again = await api.call("GET", "/ui/app.js", {
      key: null,
      headers: { "If-None-Match": first.headers.get("etag")! },
    })
    expect(again.status).toBe(304)
    expect(again.text).toBe("")
    const stale = await api.call("GET", "/ui/app.js", { key: null, headers: { "If-None-Match": '"old"' } })
    expect(stale.status).toBe(200)
  })

  test("an unknown file is a 404 in the standard error shape, and /v1 still needs a key", async () => {
    const api = await testApi()
    const res = await api.call("GET", "/ui/nothing.js", { key: null })
    expect(res.status).toBe(404)
    expect(res.json.error.code).toBe("route.not_found")
    expect((await api.call("GET", "/v1/me", { key: null })).status).toBe(401)
  })
})

describe("the browser bundle", () => {
  const bundle = uiAssets.get("app.js")!.body

  test("is built from the current ui/ sources", () => {
    const check = spawnSync(process.execPath, [join(root, "scripts", "build-dashboard.mjs"), "--check"], {
      encoding: "utf8",
    })
    expect(check.status, check.stderr).toBe(0)
  })

  test("is one ES module that parses and imports nothing", () => {
    const check = spawnSync(process.execPath, ["--input-type=module", "--check"], { input: bundle })
    expect(check.status, `${check.stderr}`).toBe(0)
    expect(bundle).not.toMatch(/^\s*(import|export)\b/m)
    expect(bundle).not.toMatch(/\bimport\(/)
  })

  test("builds the page from text nodes only and never puts the key in a URL or the console", () => {
    expect(bundle).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(/)
    expect(bundle).not.toMatch(/console\.|localStorage/)
    expect(bundle).toContain("sessionStorage")
    expect(bundle).toMatch(/Authorization: `Bearer \$\{key\}`/)
  })
})
