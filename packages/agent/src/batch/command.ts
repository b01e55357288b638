/**
 * `swarmplane-agent run-batch` as a process: parse, run one shard, and turn the outcome into the exit
 * code (0 all rows answered, 1 some failed for good, 2 bad usage, 3 the test hook fired, 128+n when
 * stopped by signal n after writing the finished rows). SIGTERM and SIGINT stop the run gracefully.
 */
import { constants } from "node:os"
import { stderrLogger } from "../logger"
import { parseRunBatch, runBatchHelp } from "./options"
import { runBatch } from "./runner"

const exitCodes = { succeeded: 0, failed: 1, injected: 3 } as const

export async function runBatchCommand(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const config = parseRunBatch(args, env)
  if (config === "help") {
    process.stdout.write(runBatchHelp)
    return 0
  }
  const stop = new AbortController()
  let signal: NodeJS.Signals | undefined
  const onSignal = (s: NodeJS.Signals) => {
    signal = s
    stop.abort()
  }
  process.once("SIGTERM", onSignal)
  process.once("SIGINT", onSignal)
  try {
    const result = await runBatch(config, { log: stderrLogger("run-batch"), signal: stop.signal, env })
    if (result.outcome === "stopped") return 128 + (signal ? constants.signals[signal] : 15)
    return exitCodes[result.outcome]
  } finally {
    process.off("SIGTERM", onSignal)
    process.off("SIGINT", onSignal)
  }
}
