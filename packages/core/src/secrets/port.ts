/** The secrets port: what resolves the secrets backend configs name. Adapters: `files.ts`, `ssm.ts`. */

/**
 * Resolves the secrets backend configs name (`sshKeySecret`, `tokenSecret`). Secrets are scoped by
 * project: a config in project B can never name project A's secret. Never logs values.
 */
export interface Secrets {
  /** The secret's value; throws a `VisibleError` (`secret.not_found`) naming the secret when absent. */
  get(project: string, name: string): Promise<string>
}
