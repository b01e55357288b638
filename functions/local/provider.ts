/**
 * The `local` scale-group provider: worker agents as child processes of the local control plane.
 * Each gets its instance id, the group's resources and attributes, the paths its tasks must not see
 * (the plane's data and the CLI's config) and its state folder as flags, and the pool's API key on its
 * stdin (`--token-file -`): never on its command line or in its environment, where a process of the
 * same user could read it. Of the plane's environment it gets only `AgentVariables` (no keys, no cloud
 * credentials). Output goes to `<data dir>/workers/<instance>.log`. Stopping sends SIGTERM (the agent
 * stops its own children), then SIGKILL after a grace period.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { createWriteStream, mkdirSync } from "node:fs"
import { join } from "node:path"
import type { ProviderInstance, ScaleGroupProvider, ScaleTarget } from "@swarmplane/core/providers/port"
import type { Logger } from "@swarmplane/core/util/logger"

export interface LocalProviderOptions {
  /** The agent's launcher (packages/agent/bin/swarmplane-agent.mjs). */
  agentBin: string
  /** The environment agents pick `AgentVariables` from; the edge passes its own. */
  env: Record<string, string | undefined>
  /** Folder for the agents' logs. */
  logDir: string
  /** Files and folders the agents' tasks must not see (`--hide`): the plane's data, the CLI's config. */
  hide?: string[]
  /** The agents' state folder (`--state-dir`), shared: an agent reaps what one that died left running. */
  stateDir?: string
  logger: Logger
  /** Where agents reach the API and the key they use; known once the API listens. */
  connection: () => { api: string; token: string }
  /** Grace before SIGKILL, ms. */
  killAfterMs?: number
  /**
   * An agent ended that nobody asked to stop (it crashed, or was killed): the plane need not wait out
   * the heartbeat grace to know its worker is gone.
   */
  onLost?: (target: ScaleTarget, instanceId: string, how: string) => void
}

interface Running {
  child: ChildProcess
  /** Stopped on purpose (scale-down, shutdown): its exit is expected. */
  stopping?: boolean
  target: string
  info: ProviderInstance
  exited: Promise<void>
}

const groupKey = (t: ScaleTarget) => `${t.project}/${t.backendId}/${t.group.name}`

/**
 * What an agent takes from the plane's environment: where programs are, who and where it runs, its
 * locale. Not the plane's own settings (`SWARMPLANE_ADMIN_KEY`), not cloud credentials.
 */
export const AgentVariables = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "TZ",
  "TMPDIR",
  "TERM",
  "XDG_STATE_HOME",
  "LD_LIBRARY_PATH",
  "CUDA_VISIBLE_DEVICES",
  "NVIDIA_VISIBLE_DEVICES",
]

export function agentEnv(env: Record<string, string | undefined>): Record<string, string> {
  const picked: Record<string, string> = {}
  for (const [key, value] of Object.entries(env))
    if (value !== undefined && (AgentVariables.includes(key) || key.startsWith("LC_"))) picked[key] = value
  return picked
}

export function LocalProvider(
  options: LocalProviderOptions,
): ScaleGroupProvider & { stopAll(): Promise<void> } {
  const running = new Map<string, Running>()
  mkdirSync(options.logDir, { recursive: true })

  const stopOne = async (id: string) => {
    const r = running.get(id)
    if (!r) return
    if (r.child.exitCode === null && r.child.signalCode === null) {
      r.stopping = true
      r.child.kill("SIGTERM")
      const timer = setTimeout(() => r.child.kill("SIGKILL"), options.killAfterMs ?? 10_000)
      await r.exited
      clearTimeout(timer)
    }
    running.delete(id)
  }

  return {
    async start(target, count) {
      const { api, token } = options.connection()
      const { group } = target
      const ids: string[] = []
      for (let i = 0; i < count; i++) {
        const id = `local-${randomBytes(4).toString("hex")}`
        const args = [
          options.agentBin,
          "worker",
          "--api",
          api,
          "--backend",
          target.backendId,
          "--group",
          group.name,
          "--instance-id",
          id,
          "--name",
          id,
          "--cpu",
          String(group.resources.cpu),
          "--memory-mib",
          String(group.resources.memoryMiB),
          "--gpu",
          String(group.resources.gpu),
          ...(group.resources.gpuType ? ["--gpu-type", group.resources.gpuType] : []),
          ...Object.entries(group.attributes).flatMap(([k, v]) => ["--attr", `${k}=${v}`]),
          "--token-file",
          "-",
          ...(options.stateDir ? ["--state-dir", options.stateDir] : []),
          ...(options.hide ?? []).flatMap((path) => ["--hide", path]),
        ]
        const log = createWriteStream(join(options.logDir, `${id}.log`), { flags: "a", mode: 0o600 })
        const child = spawn(process.execPath, args, {
          env: agentEnv(options.env),
          stdio: ["pipe", "pipe", "pipe"],
        })
        child.stdin?.on("error", () => undefined)
        child.stdin?.end(`${token}\n`)
        child.stdout?.pipe(log)
        child.stderr?.pipe(log)
        const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
          child.once("exit", (code, signal) => resolve({ code, signal })),
        )
        void exited.then(({ code, signal }) => {
          log.end()
          const entry = running.get(id)
          if (entry?.child === child) running.delete(id)
          if (entry && !entry.stopping)
            options.onLost?.(target, id, signal ? `killed by ${signal}` : `exited with code ${code}`)
        })
        child.once("error", (error) => options.logger.error(`worker ${id} could not start: ${error.message}`))
        running.set(id, {
          child,
          target: groupKey(target),
          info: { id, startedAt: Date.now() },
          exited: exited.then(() => undefined),
        })
        ids.push(id)
      }
      options.logger.info(
        `started ${count} worker(s) in ${target.backendId}/${group.name}: ${ids.join(", ")}`,
      )
      return ids
    },

    async stop(target, instanceIds) {
      const mine = instanceIds.filter((id) => running.get(id)?.target === groupKey(target))
      if (mine.length)
        options.logger.info(
          `stopping worker(s) in ${target.backendId}/${target.group.name}: ${mine.join(", ")}`,
        )
      await Promise.all(mine.map(stopOne))
    },

    async list(target) {
      const key = groupKey(target)
      return [...running.values()]
        .filter((r) => r.target === key && r.child.exitCode === null)
        .map((r) => r.info)
    },

    async stopAll() {
      await Promise.all([...running.keys()].map(stopOne))
    },
  }
}
