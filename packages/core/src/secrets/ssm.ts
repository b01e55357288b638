/**
 * Secrets in SSM Parameter Store (deployed): `<prefix>/<project>/<name>`, SecureString, cached per
 * process. Scoped by project, so a backend config of one project can never read another's secret.
 */
import type { SSMClient } from "@aws-sdk/client-ssm"
import { BackendError, VisibleError } from "../util/errors"
import type { Secrets } from "./port"

export function SsmSecrets(options: {
  client: SSMClient
  prefix: string
  ttlMs?: number
  now?: () => number
}): Secrets {
  const cache = new Map<string, { value: string; at: number }>()
  const ttl = options.ttlMs ?? 5 * 60_000
  const now = options.now ?? Date.now
  return {
    async get(project, name) {
      const path = `${options.prefix.replace(/\/$/, "")}/${project}/${name}`
      const hit = cache.get(path)
      if (hit && now() - hit.at < ttl) return hit.value
      const { GetParameterCommand, ParameterNotFound } = await import("@aws-sdk/client-ssm")
      try {
        const out = await options.client.send(new GetParameterCommand({ Name: path, WithDecryption: true }))
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
