/** The local control plane as a program: environment in, a running control plane out, stopped by a signal. */
import { homedir } from "node:os"
import { join, relative, resolve } from "node:path"
import { consoleLogger } from "./console-logger"
import { startLocalControlPlane } from "./control-plane"

/**
 * Run the local control plane until SIGINT/SIGTERM, configured from `env` (the caller's environment:
 * `npm start` and `swarmplane dev` pass `process.env`). Exits the process on a configuration error.
 *
 *   SWARMPLANE_DATA_DIR    state, secrets and the admin key (default `.swarmplane`)
 *   SWARMPLANE_PORT        API port (default 8787); SWARMPLANE_HOST (default 127.0.0.1)
 *   SWARMPLANE_ADMIN_KEY   use this admin key instead of a generated one
 *   SWARMPLANE_CONFIG_DIR  where the CLI's config lives (default ~/.config/swarmplane)
 *   SWARMPLANE_LOG         debug | info | warn | error (default info)
 */
export async function runLocal(env: Record<string, string | undefined>): Promise<void> {
  const level = (env.SWARMPLANE_LOG ?? "info") as "debug" | "info" | "warn" | "error"
  const logger = consoleLogger({ level })
  const dataDir = resolve(env.SWARMPLANE_DATA_DIR ?? ".swarmplane")
  const port = Number(env.SWARMPLANE_PORT ?? 8787)
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`SWARMPLANE_PORT must be a port number (0-65535), got "${env.SWARMPLANE_PORT}"`)
    process.exit(2)
  }
  const adminKey = env.SWARMPLANE_ADMIN_KEY
  if (adminKey !== undefined && adminKey.length < 16) {
    console.error("SWARMPLANE_ADMIN_KEY must be at least 16 characters; unset it to get a generated key")
    process.exit(2)
  }
  const cliConfigDir =
    env.SWARMPLANE_CONFIG_DIR ?? join(env.XDG_CONFIG_HOME ?? join(homedir(), ".config"), "swarmplane")

  try {
    const started = Date.now()
    const plane = await startLocalControlPlane({
      dataDir,
      host: env.SWARMPLANE_HOST ?? "127.0.0.1",
      port,
      logger,
      cliConfigDir,
      ...(adminKey ? { adminKey } : {}),
    })
    const rel = relative(process.cwd(), dataDir)
    const shownDir = rel === "" ? "." : rel.startsWith("..") ? dataDir : rel
    logger.info(
      `swarmplane local control plane on ${plane.url} (state in ${shownDir}/, ready in ${Date.now() - started} ms)`,
    )
    // Shown once, on the first start, as the issue of a new key always is; later starts only say where it is.
    if (plane.adminKeyCreated && !adminKey)
      console.log(
        `\n  admin key (also in ${shownDir}/admin-key and the CLI profile "local"):\n  ${plane.adminKey}\n`,
      )
    else logger.info(`admin key in ${shownDir}/admin-key and the CLI profile "local"`)
    logger.info(`try: curl ${plane.url}/health   docs: ${plane.url}/docs`)
    let stopping = false
    const stop = async (signal: string) => {
      if (stopping) {
        logger.info(`${signal} again: exiting now`)
        process.exit(130)
      }
      stopping = true
      logger.info(`${signal}: stopping`)
      await plane.stop()
      process.exit(0)
    }
    process.on("SIGINT", () => void stop("SIGINT"))
    process.on("SIGTERM", () => void stop("SIGTERM"))
  } catch (error) {
    console.error(`swarmplane: ${error instanceof Error ? error.message : String(error)}`)
    process.exit(1)
  }
}
