/**
 * Waiting for a swarm to reach a phase: short `GET /v1/swarms/{name}?wait=PHASE&timeoutS=N` long polls
 * in a loop (so the progress line moves), until the API says `reached` (exit 0), `settled` elsewhere
 * (FAILED/STOPPED: exit 8) or our own deadline passes (exit 7).
 */
import type { Client, Swarm, SwarmPhase } from "../client"
import type { Ctx } from "../context"
import { CliError, ExitCode } from "../errors"
import { progress } from "../progress"
import { swarmLine } from "../views"

/** Each poll waits at most this long on the server, so progress is redrawn every few seconds. */
const PollS = 2

/** The API's `Swarmplane-Wait` judgement, for a server that does not send it. */
function judge(swarm: Swarm, phase: SwarmPhase): "reached" | "settled" | "waiting" {
  const current = phase !== "RUNNING" || swarm.observedGeneration === swarm.generation
  if (swarm.phase === phase && current) return "reached"
  const replicaGeneration = swarm.replicaGeneration ?? swarm.generation
  if (phase === "RUNNING" && swarm.replicaSet?.rolledBack?.generation === replicaGeneration) return "settled"
  if (swarm.desired === "deleted") return swarm.phase === "STOPPED" ? "settled" : "waiting"
  if (swarm.phase === "FAILED" || swarm.phase === "STOPPED") return "settled"
  return "waiting"
}

export interface WaitOptions {
  phase: "RUNNING" | "STOPPED"
  timeoutS: number
  /** What to run to keep waiting after a timeout. */
  again: string
}

export async function waitForSwarm(
  ctx: Ctx,
  client: Client,
  name: string,
  options: WaitOptions,
): Promise<Swarm> {
  const { phase, timeoutS } = options
  const show = progress(ctx.io.stderr, ctx.err)
  const deadline = Date.now() + timeoutS * 1000
  try {
    for (;;) {
      const left = Math.max(0, Math.ceil((deadline - Date.now()) / 1000))
      const { swarm, result } = await client.getSwarm(name, { phase, timeoutS: Math.min(PollS, left) })
      show.update(swarmLine(swarm))
      const state = result === "timeout" ? "waiting" : (result ?? judge(swarm, phase))
      if (state === "reached") return swarm
      if (state === "settled")
        throw new CliError(
          swarm.phase === "RUNNING" && swarm.replicaSet?.rolledBack
            ? `swarm "${name}" still serves its previous spec: ${swarm.message ?? `the update was rolled back: ${swarm.replicaSet.rolledBack.reason}`}`
            : `swarm "${name}" ended ${swarm.phase} while waiting for ${phase}${swarm.message ? `: ${swarm.message}` : ""}`,
          ExitCode.ended,
          `see why with: swarmplane swarm describe ${name}`,
        )
      if (Date.now() >= deadline)
        throw new CliError(
          `timed out after ${timeoutS} s waiting for swarm "${name}" to be ${phase} (it is ${swarm.phase}, ${swarm.replicaStatus.ready}/${swarm.replicaStatus.total} replicas ready)`,
          ExitCode.timeout,
          `keep waiting with: ${options.again}, or see why with: swarmplane swarm describe ${name}`,
        )
    }
  } finally {
    show.done()
  }
}
