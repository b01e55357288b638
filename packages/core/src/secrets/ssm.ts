/**
 * Secrets in SSM Parameter Store (deployed): `<prefix>/<project>/<name>`, SecureString, cached per
 * process. Scoped by project, so a backend config of one project can never read another's secret.
 * The SSM client may be given as a factory: it then runs (once) when a secret is first read, so a
 * cold start that reads none never loads `@aws-sdk/client-ssm`.
 */
import type { SSMClient } from "@aws-sdk/client-ssm"
import { BackendError, VisibleError } from "../util/errors"
import type { Secrets } from "./port"

export function SsmSecrets(options: {
  /** The client, or a factory that builds it on the first read (e.g. behind a dynamic `import()`). */
  client: SSMClient | (() => Promise<SSMClient>)
  prefix: string
  ttlMs?: number
  now?: () => number
}): Secrets {
  const cache = new Map<string, { value: string; at: number }>()
  const ttl = options.ttlMs ?? 5 * 60_000
  const now = options.now ?? Date.now
  const given = options.client
  let client: Promise<SSMClient> | undefined
  const ssm = (): Promise<SSMClient> => {
    if (typeof given !== "function") return Promise.resolve(given)
    // One client per process; a failed load (say, a broken bundle) is retried on the next read.
    client ??= given().catch((error: unknown) => {
      client = undefined
      throw error
    })
    return client
  }
  return {
    async get(project, name) {
      const path = `${options.prefix.replace(/\/$/, "")}/${project}/${name}`
      const hit = cache.get(path)
      if (hit && now() - hit.at < ttl) return hit.value
      const { GetParameterCommand, ParameterNotFound } = await import("@aws-sdk/client-ssm")
      try {
        const out = await (await ssm()).send(new GetParameterCommand({ Name: path, WithDecryption: true }))
        const value = out.Parameter?.Value
        if (value === undefined) throw new ParameterNotFound({ message: "empty", $metadata: {} })
        cache.set(path, { value, at: now() })
        return value
      } catch (error) {
        if (error instanceof ParameterNotFound)
          throw new VisibleError(
            "secret.not_found",
            `secret "${name}" not found: create SSM parameter ${path}`,
            400,
            { name },
          )
        throw new BackendError(`reading secret "${name}" failed`, true, { cause: error })
      }
    },
  }
}
