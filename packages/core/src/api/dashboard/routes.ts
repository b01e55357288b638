/**
 * The web dashboard, served by the API itself: `GET /` is the page and `GET /ui/{name}` its files. They
 * need no key (the page signs in against `/v1/me`); every answer carries a strict Content-Security-Policy
 * (same-origin only, no inline script or style, Trusted Types) and an ETag; the browser revalidates
 * (`no-cache`), so a new deployment is picked up at the next load. The files (the browser bundle is
 * most of the API's own code by size) load on the first dashboard request, not at the API's cold start.
 */
import type { Context, Env, Hono } from "hono"
import { errorBody } from "../errors"
import type { Asset } from "./assets"

let assets: Promise<typeof import("./assets")> | undefined
const loadAssets = () => (assets ??= import("./assets"))

export const contentSecurityPolicy = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "require-trusted-types-for 'script'",
  "trusted-types 'none'",
].join("; ")

const securityHeaders = {
  "Content-Security-Policy": contentSecurityPolicy,
  "X-Content-Type-Options": "nosniff",
  "X-Frame-Options": "DENY",
  "Referrer-Policy": "no-referrer",
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Resource-Policy": "same-origin",
}

function serve(c: Context, file: Asset): Response {
  const headers = { ...securityHeaders, "Cache-Control": "no-cache", ETag: file.etag }
  const match = c.req.header("If-None-Match")
  if (match?.split(",").some((tag) => tag.trim().replace(/^W\//, "") === file.etag))
    return c.body(null, 304, headers)
  return c.body(file.body, 200, { ...headers, "Content-Type": file.type })
}

export function dashboardRoutes<E extends Env>(app: Hono<E>): void {
  app.get("/", async (c) => serve(c, (await loadAssets()).page))
  app.get("/ui/:name", async (c) => {
    const name = c.req.param("name")
    const file = (await loadAssets()).uiAssets.get(name)
    if (!file)
      return c.json(errorBody("route.not_found", `no dashboard file ${name}; see / for the dashboard`), 404)
    return serve(c, file)
  })
}
