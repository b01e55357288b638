/**
 * The dashboard's files, bundled into the code (no build step, nothing fetched from elsewhere): the page,
 * the stylesheet, the icon and the browser modules, each with its content type and a content-hash ETag.
 */
import { createHash } from "node:crypto"
import { apiJs } from "./client-api"
import { appJs } from "./client-app"
import { domJs } from "./client-dom"
import { infraJs } from "./client-infra"
import { jobJs } from "./client-job"
import { jobsJs } from "./client-jobs"
import { swarmsJs } from "./client-swarms"
import { iconSvg, pageHtml } from "./page"
import { styleCss } from "./style"

export interface Asset {
  body: string
  type: string
  /** A strong ETag from the content, so a browser revalidates with a cheap 304. */
  etag: string
}

function asset(body: string, type: string): Asset {
  const hash = createHash("sha256").update(body).digest("base64url").slice(0, 27)
  return { body, type, etag: `"${hash}"` }
}

const js = "text/javascript; charset=utf-8"

/** `GET /`. */
export const page = asset(pageHtml, "text/html; charset=utf-8")

/** `GET /ui/{name}`; the modules import each other by these names (`./dom.js`). */
export const uiAssets: ReadonlyMap<string, Asset> = new Map([
  ["app.js", asset(appJs, js)],
  ["api.js", asset(apiJs, js)],
  ["dom.js", asset(domJs, js)],
  ["swarms.js", asset(swarmsJs, js)],
  ["jobs.js", asset(jobsJs, js)],
  ["job.js", asset(jobJs, js)],
  ["infra.js", asset(infraJs, js)],
  ["style.css", asset(styleCss, "text/css; charset=utf-8")],
  ["icon.svg", asset(iconSvg, "image/svg+xml")],
])
