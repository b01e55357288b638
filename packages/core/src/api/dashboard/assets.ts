/**
 * The dashboard's files, held in the code (nothing fetched from elsewhere, nothing built at runtime): the
 * page, the stylesheet, the icon and the browser bundle, each with its content type and a content-hash
 * ETag. The bundle is `ui/` built by scripts/build-dashboard.mjs into bundle.generated.ts (gitignored),
 * which the pre-step of `npm start` and `npm test` refreshes whenever ui/ changes.
 */
import { createHash } from "node:crypto"
import { appJs } from "./bundle.generated"
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

/** `GET /`. */
export const page = asset(pageHtml, "text/html; charset=utf-8")

/** `GET /ui/{name}`: the page loads the bundle as the ES module `/ui/app.js`. */
export const uiAssets: ReadonlyMap<string, Asset> = new Map([
  ["app.js", asset(appJs, "text/javascript; charset=utf-8")],
  ["style.css", asset(styleCss, "text/css; charset=utf-8")],
  ["icon.svg", asset(iconSvg, "image/svg+xml")],
])
