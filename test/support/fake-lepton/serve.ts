/**
 * The fake Lepton workspace as a program of its own, which `SWARMPLANE_FAKE_LEPTON=1 npm start` runs
 * beside the local control plane (the plane knows only this command line, never the test code):
 *
 *   node --import tsx test/support/fake-lepton/serve.ts
 *
 * It starts a fake workspace (index.ts) on a free port of 127.0.0.1, prints one JSON line on stdout,
 * `{ "url", "workspaceId", "token", "pid" }`, and serves until SIGTERM or until its stdin closes (the
 * process that started it is gone, however it ended); then it stops every process the fake runs and
 * exits 0. SIGINT is ignored: a Ctrl-C in the terminal reaches the plane too, which stops this in its
 * turn, after its own loops. The token is new on each start (the line above is its only copy).
 */
import { randomBytes } from "node:crypto"
import { startFakeLepton } from "./index"

const fake = await startFakeLepton({
  workspaceId: "ws-local-fake",
  token: randomBytes(24).toString("base64url"),
})

let stopping = false
const stop = () => {
  if (stopping) return
  stopping = true
  void fake.stop().finally(() => process.exit(0))
}
process.on("SIGTERM", stop)
process.on("SIGINT", () => {})
process.stdin.on("end", stop)
process.stdin.on("close", stop)
process.stdin.resume()

process.stdout.write(
  `${JSON.stringify({ url: fake.url, workspaceId: fake.workspaceId, token: fake.token, pid: process.pid })}\n`,
)
