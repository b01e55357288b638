/**
 * Test support: the machine's Chromium for the browser suite. Without it the suite is skipped with a
 * line saying how to install it, except under `.ci/run` (SWARMPLANE_REQUIRE_CHROMIUM=1), where a
 * missing browser fails the run.
 */
import { existsSync } from "node:fs"

/** SWARMPLANE_CHROMIUM names the browser when set (and only it is tried); else Debian's paths. */
const candidates = process.env.SWARMPLANE_CHROMIUM
  ? [process.env.SWARMPLANE_CHROMIUM]
  : ["/usr/bin/chromium", "/usr/bin/chromium-browser"]

export function chromiumPath(): string | undefined {
  const found = candidates.find((path): path is string => !!path && existsSync(path))
  if (found) return found
  if (process.env.SWARMPLANE_REQUIRE_CHROMIUM === "1")
    throw new Error("no Chromium for the browser suite: install it with sudo apt-get install chromium")
  console.warn(
    "skipping the browser suite: no Chromium; install it with sudo apt-get install chromium (or set SWARMPLANE_CHROMIUM)",
  )
  return undefined
}
