/**
 * `npm start` and `swarmplane dev` (which runs this file as a child process): the local control plane
 * as a program, and its composition root, the one place that reads the local environment. It turns
 * the environment into `LocalOptions`, starts the plane (functions/local/) and runs it until
 * SIGINT/SIGTERM (or, under `swarmplane dev`, until the CLI is gone); a second signal exits at once.
 * A configuration error exits 2, a failed start 1.
 *
 *   SWARMPLANE_DATA_DIR    state, secrets and the admin key (default `.swarmplane`)
 *   SWARMPLANE_LOCAL_STORE where the state is kept: `journal` (the default: `store.jsonl` in the data
 *                          folder, in this process) or `dynalite` (the DynamoDB and SQS adapters on
 *                          embedded dynalite and fauxqs, `dynamo/` in the data folder); a folder that
 *                          holds only dynalite's state goes on with dynalite unless this says otherwise
 *   SWARMPLANE_PORT        API port (default 8787); SWARMPLANE_HOST (default 127.0.0.1)
 *   SWARMPLANE_ADMIN_KEY   use this admin key instead of a generated one
 *   SWARMPLANE_CONFIG_DIR  where the CLI's config lives (default ~/.config/swarmplane)
 *   SWARMPLANE_LOG         debug | info | warn | error (default info)
 *   SWARMPLANE_FAKE_LEPTON 1: also run a fake Lepton workspace, with a `lepton` backend on it (the
 *                          same as `npm start -- --fake-lepton`; needs this checkout's test/ folder)
 *   SWARMPLANE_FAKE_EKS    1: also run a fake EKS cluster with Kueue, with an `eks` backend on it (the
 *                          same as `npm start -- --fake-eks`; needs this checkout's test/ folder); its
 *                          IAM user becomes the process's AWS credentials if the environment has none
 *
 * The same list is in docs/configuration.md. Local worker agents get only PATH, HOME, the locale and
 * a few such variables of this environment (`AgentVariables` in local/provider.ts), never its keys.
 */
import { existsSync } from "node:fs"
import { homedir } from "node:os"
import { join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { consoleLogger } from "./local/console-logger"
import { type LocalStore, LocalStores, startLocalControlPlane } from "./local/control-plane"
import {
  FakeEksBackend,
  type FakeEksProcess,
  startFakeEksProcess,
  useFakeEksCredentials,
  wireFakeEks,
} from "./local/fake-eks"
import {
  FakeLeptonBackend,
  type FakeLeptonProcess,
  FakeLeptonSecret,
  startFakeLeptonProcess,
  wireFakeLepton,
} from "./local/fake-lepton"

const env = process.env
env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true"

function fail(message: string, code: number): never {
  console.error(message)
  process.exit(code)
}

// 1. Configuration.
const logger = consoleLogger({ level: (env.SWARMPLANE_LOG ?? "info") as "debug" | "info" | "warn" | "error" })
const dataDir = resolve(env.SWARMPLANE_DATA_DIR ?? ".swarmplane")
const storeSetting = env.SWARMPLANE_LOCAL_STORE ?? ""
if (storeSetting !== "" && !LocalStores.includes(storeSetting as LocalStore))
  fail(`SWARMPLANE_LOCAL_STORE must be ${LocalStores.join(" or ")}, got "${storeSetting}"`, 2)
const store = storeSetting === "" ? undefined : (storeSetting as LocalStore)
const port = Number(env.SWARMPLANE_PORT ?? 8787)
if (!Number.isInteger(port) || port < 0 || port > 65535)
  fail(`SWARMPLANE_PORT must be a port number (0-65535), got "${env.SWARMPLANE_PORT}"`, 2)
const adminKey = env.SWARMPLANE_ADMIN_KEY
if (adminKey !== undefined && adminKey.length < 16)
  fail("SWARMPLANE_ADMIN_KEY must be at least 16 characters; unset it to get a generated key", 2)
const cliConfigDir =
  env.SWARMPLANE_CONFIG_DIR ?? join(env.XDG_CONFIG_HOME ?? join(homedir(), ".config"), "swarmplane")
const fakeLeptonSetting = env.SWARMPLANE_FAKE_LEPTON ?? ""
if (!["", "0", "1", "false", "true"].includes(fakeLeptonSetting))
  fail(`SWARMPLANE_FAKE_LEPTON must be 1 (run a fake Lepton workspace) or 0, got "${fakeLeptonSetting}"`, 2)
const withFakeLepton =
  process.argv.slice(2).includes("--fake-lepton") || fakeLeptonSetting === "1" || fakeLeptonSetting === "true"
// The fake is test code: the plane runs it as a program and never imports it.
const checkout = fileURLToPath(new URL("..", import.meta.url))
const fakeLeptonProgram = join(checkout, "test", "support", "fake-lepton", "serve.ts")
if (withFakeLepton && !existsSync(fakeLeptonProgram))
  fail(
    "SWARMPLANE_FAKE_LEPTON (--fake-lepton) needs the fake Lepton of a full checkout (test/support/fake-lepton/), which this one lacks",
    2,
  )
const fakeEksSetting = env.SWARMPLANE_FAKE_EKS ?? ""
if (!["", "0", "1", "false", "true"].includes(fakeEksSetting))
  fail(`SWARMPLANE_FAKE_EKS must be 1 (run a fake EKS cluster) or 0, got "${fakeEksSetting}"`, 2)
const withFakeEks =
  process.argv.slice(2).includes("--fake-eks") || fakeEksSetting === "1" || fakeEksSetting === "true"
const fakeEksProgram = join(checkout, "test", "support", "fake-kube", "serve.ts")
if (withFakeEks && !existsSync(fakeEksProgram))
  fail(
    "SWARMPLANE_FAKE_EKS (--fake-eks) needs the fake EKS cluster of a full checkout (test/support/fake-kube/), which this one lacks",
    2,
  )

// 2. Start, and say where everything is.
const started = Date.now()
// The fake EKS starts first: the eks backends read the process's AWS credentials when they first run.
let fakeEks: { process: FakeEksProcess; ownCredentials: string | undefined; wired: boolean } | undefined
if (withFakeEks) {
  const fake = await startFakeEksProcess(fakeEksProgram, checkout, env).catch((error: unknown) =>
    fail(`swarmplane: ${error instanceof Error ? error.message : String(error)}`, 1),
  )
  fakeEks = { process: fake, ownCredentials: useFakeEksCredentials(env, homedir(), fake), wired: false }
}
const plane = await startLocalControlPlane({
  dataDir,
  host: env.SWARMPLANE_HOST ?? "127.0.0.1",
  port,
  logger,
  cliConfigDir,
  agentEnv: env,
  ...(adminKey ? { adminKey } : {}),
  ...(store ? { store } : {}),
}).catch(async (error: unknown) => {
  await fakeEks?.process.stop()
  return fail(`swarmplane: ${error instanceof Error ? error.message : String(error)}`, 1)
})
let fakeLepton: { process: FakeLeptonProcess; wired: boolean } | undefined
if (withFakeLepton) {
  const fake = await startFakeLeptonProcess(fakeLeptonProgram, checkout, env).catch(
    async (error: unknown) => {
      await plane.stop()
      return fail(`swarmplane: ${error instanceof Error ? error.message : String(error)}`, 1)
    },
  )
  const wired = await wireFakeLepton(plane, dataDir, fake).catch(async (error: unknown) => {
    await plane.stop()
    await fake.stop()
    return fail(`swarmplane: the fake Lepton: ${error instanceof Error ? error.message : String(error)}`, 1)
  })
  fakeLepton = { process: fake, wired }
}
if (fakeEks) {
  const fake = fakeEks.process
  fakeEks.wired = await wireFakeEks(plane, fake).catch(async (error: unknown) => {
    await plane.stop()
    await fake.stop()
    return fail(`swarmplane: the fake EKS: ${error instanceof Error ? error.message : String(error)}`, 1)
  })
}
// 3. Run until a signal. The handlers are in place before the ready line: a supervisor may signal as
// soon as it reads it, and a signal with no handler yet would kill the process outright.
let stopping = false
const stop = async (why: string) => {
  if (stopping) {
    logger.info(`${why} again: exiting now`)
    process.exit(130)
  }
  stopping = true
  logger.info(`${why}: stopping`)
  await plane.stop()
  await fakeLepton?.process.stop()
  await fakeEks?.process.stop()
  process.exit(0)
}
process.on("SIGINT", () => void stop("SIGINT"))
process.on("SIGTERM", () => void stop("SIGTERM"))
// While stopping, work cut off by the closing store (a request or a pass in flight) may reject with
// nothing left to await it: said, not a crash, so a clean stop exits 0. Before, it fails as it would.
const cutOff = (reason: unknown) => {
  const message = reason instanceof Error ? reason.message : String(reason)
  if (stopping) return logger.warn(`while stopping: ${message}`)
  logger.error(`unhandled: ${reason instanceof Error && reason.stack ? reason.stack : message}`)
  process.exit(1)
}
process.on("unhandledRejection", cutOff)
process.on("uncaughtException", cutOff)
// Run by `swarmplane dev`, which forwards signals and keeps an IPC channel open: when the channel
// closes, the CLI is gone (killed outright), and the plane stops rather than run on unowned.
if (process.connected) process.once("disconnect", () => void stop("the CLI exited"))

const rel = relative(process.cwd(), dataDir)
const shownDir = rel === "" ? "." : rel.startsWith("..") ? dataDir : rel
logger.info(
  `swarmplane local control plane on ${plane.url} (state in ${shownDir}/ on ${plane.store}, ready in ${Date.now() - started} ms)`,
)
// Shown once, on the first start, as the issue of a new key always is; later starts only say where it is.
if (plane.adminKeyCreated && !adminKey)
  console.log(
    `\n  admin key (also in ${shownDir}/admin-key and the CLI profile "local"):\n  ${plane.adminKey}\n`,
  )
else logger.info(`admin key in ${shownDir}/admin-key and the CLI profile "local"`)
logger.info(`try: curl ${plane.url}/health   docs: ${plane.url}/docs`)
if (fakeLepton) {
  const { process: fake, wired } = fakeLepton
  logger.info(
    wired
      ? `fake Lepton workspace on ${fake.url} (pid ${fake.pid}), backend "${FakeLeptonBackend}" runs on it: try swarmplane job submit --backend ${FakeLeptonBackend} --tasks 2 -- sh -c 'echo shard $SHARD_ID', or POST /v1/jobs with "backendId": "${FakeLeptonBackend}"`
      : `fake Lepton workspace on ${fake.url} (pid ${fake.pid}), token in the secret ${FakeLeptonSecret}; a backend "${FakeLeptonBackend}" already exists and is left as it is: register another one on the fake to use it`,
  )
  void fake.exited.then((code) => {
    if (!stopping)
      logger.warn(`the fake Lepton exited (code ${code}); the backend on it fails until the next start`)
  })
}
if (fakeEks) {
  const { process: fake, ownCredentials, wired } = fakeEks
  const where = `fake EKS cluster "${fake.clusterName}" on ${fake.eksUrl} (pid ${fake.pid})`
  logger.info(
    wired
      ? `${where}, backend "${FakeEksBackend}" runs on it (LocalQueue ${fake.namespace}/${fake.localQueue}): try swarmplane job submit --backend ${FakeEksBackend} --tasks 2 -- sh -c 'echo shard $SHARD_ID', or POST /v1/jobs with "backendId": "${FakeEksBackend}"`
      : `${where}; a backend "${FakeEksBackend}" already exists and is left as it is: register another one on the fake (clusterName ${fake.clusterName}, region ${fake.region}, endpoint ${fake.eksUrl}, namespace ${fake.namespace}, localQueue ${fake.localQueue}) to use it`,
  )
  if (ownCredentials === undefined)
    logger.info(
      `this environment has no AWS credentials: the plane uses the fake's IAM user ${fake.accessKeyId} as its own (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY of this process)`,
    )
  else
    logger.warn(
      `this environment has AWS credentials of its own (${ownCredentials}), which the plane keeps and the fake does not accept: an eks backend on the fake fails to authenticate; start without them to try it`,
    )
  void fake.exited.then((code) => {
    if (!stopping)
      logger.warn(`the fake EKS exited (code ${code}); the backend on it fails until the next start`)
  })
}
