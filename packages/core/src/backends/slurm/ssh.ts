/**
 * SSH to a cluster's login node through ssh2: one connection for a backend's invocation, exec
 * channels on it (the script goes on stdin, so nothing is copied to the login node), Nagle off
 * (commands answer in milliseconds instead of ~45 ms), timeouts, one reconnect, and a pinned host
 * key: a changed key is refused, never trusted on first use. ssh2 is loaded only here, lazily.
 */
import { createHash } from "node:crypto"
import { BackendError, VisibleError } from "../../util/errors"

export interface SshTarget {
  host: string
  port: number
  user: string
  privateKey: string
  /** Pinned host key: a known_hosts style line (`ssh-ed25519 AAAA...`) or its `SHA256:` fingerprint. */
  hostKey: string
  connectTimeoutS: number
  commandTimeoutS: number
}

export interface ExecResult {
  code: number
  stdout: string
  stderr: string
}

/** The SHA256 fingerprint of a host key blob, as OpenSSH prints it. */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash("sha256").update(blob).digest("base64").replace(/=+$/, "")}`
}

/** Whether the key the server presents is the pinned one. */
export function hostKeyMatches(pinned: string, presented: Buffer): boolean {
  const want = pinned.trim()
  if (want.startsWith("SHA256:")) return want.replace(/=+$/, "") === fingerprint(presented)
  // `[host]:port ssh-ed25519 AAAA... comment` or `ssh-ed25519 AAAA...`: the base64 blob is the field after the type.
  const fields = want.split(/\s+/)
  const at = fields.findIndex((f) => /^(ssh-|ecdsa-|sk-)/.test(f))
  const blob = at >= 0 ? fields[at + 1] : undefined
  return blob !== undefined && Buffer.from(blob, "base64").equals(presented)
}

type Ssh2Client = import("ssh2").Client

export class SshSession {
  /** Commands run by every session of this process (what the benchmark counts). */
  static totalCommands = 0
  /** Commands run on this session (a reconcile pass should run exactly one). */
  commands = 0
  private client: Ssh2Client | undefined
  private presented: string | undefined

  constructor(private readonly target: SshTarget) {}

  private async connect(): Promise<Ssh2Client> {
    // ssh2 is CommonJS: its named exports come through `default` under some loaders.
    const loaded = await import("ssh2")
    const ssh2 = (loaded as unknown as { default?: typeof loaded }).default ?? loaded
    const client = new ssh2.Client()
    const t = this.target
    const { utils } = ssh2
    const parsed = utils.parseKey(t.privateKey)
    if (parsed instanceof Error)
      throw new VisibleError(
        "backend.ssh_key_invalid",
        `the SSH key for ${t.user}@${t.host} is not a private key ssh2 can read (${parsed.message}); check the backend's sshKeySecret`,
      )
    await new Promise<void>((resolve, reject) => {
      client
        .once("ready", () => {
          client.setNoDelay(true)
          resolve()
        })
        .once("error", (error: Error) => {
          if (this.presented)
            reject(
              new VisibleError(
                "backend.host_key_changed",
                `the host key of ${t.host}:${t.port} is ${this.presented}, not the pinned one; if the change is expected, update the backend's hostKey`,
                409,
              ),
            )
          else
            reject(
              new BackendError(`ssh to ${t.user}@${t.host}:${t.port} failed: ${error.message}`, true, {
                cause: error,
              }),
            )
        })
        .connect({
          host: t.host,
          port: t.port,
          username: t.user,
          privateKey: t.privateKey,
          readyTimeout: t.connectTimeoutS * 1000,
          keepaliveInterval: 10_000,
          hostVerifier: (key: Buffer) => {
            if (hostKeyMatches(t.hostKey, key)) return true
            this.presented = fingerprint(key)
            return false
          },
        })
    })
    client.once("close", () => {
      if (this.client === client) this.client = undefined
    })
    return client
  }

  /** Run one command (with `stdin` if given); reconnects once if the connection was lost. */
  async exec(command: string, stdin?: string): Promise<ExecResult> {
    for (let attempt = 0; ; attempt++) {
      this.client ??= await this.connect()
      try {
        const result = await this.run(this.client, command, stdin)
        this.commands++
        SshSession.totalCommands++
        return result
      } catch (error) {
        if (attempt > 0 || !(error instanceof BackendError) || !error.retryable) throw error
        this.client?.end()
        this.client = undefined
      }
    }
  }

  private run(client: Ssh2Client, command: string, stdin?: string): Promise<ExecResult> {
    const timeoutMs = this.target.commandTimeoutS * 1000
    return new Promise((resolve, reject) => {
      client.exec(command, (error, channel) => {
        if (error)
          return reject(new BackendError(`ssh exec failed: ${error.message}`, true, { cause: error }))
        let stdout = ""
        let stderr = ""
        const timer = setTimeout(() => {
          channel.close()
          reject(
            new BackendError(
              `remote command timed out after ${this.target.commandTimeoutS}s: ${command.slice(0, 80)}`,
              true,
            ),
          )
        }, timeoutMs)
        channel.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
        channel.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
        channel.once("close", (code: number | null) => {
          clearTimeout(timer)
          resolve({ code: code ?? -1, stdout, stderr })
        })
        if (stdin !== undefined) channel.end(stdin)
        else channel.end()
      })
    })
  }

  close(): void {
    this.client?.end()
    this.client = undefined
  }
}
