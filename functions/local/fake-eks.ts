/**
 * The fake EKS cluster running Kueue that `SWARMPLANE_FAKE_EKS=1 npm start` runs beside the local
 * plane: started as a program of its own (test/support/fake-kube/serve.ts; the plane never imports
 * test code) that stops when this process's end closes its stdin, and wired in as the `eks` backend.
 * The eks backend signs its tokens with the process's AWS credentials (the default provider chain),
 * so the fake's IAM user becomes those credentials, but only where the environment has none of its own.
 */
import { existsSync } from "node:fs"
import { join } from "node:path"
import { BackendConfig } from "@swarmplane/core/model/backend"
import type { LocalControlPlane } from "./control-plane"
import { type FakeProgram, startFakeProgram } from "./fake-program"

/** What the fake cluster's one line says. */
interface FakeEksLine {
  eksUrl: string
  clusterName: string
  region: string
  namespace: string
  localQueue: string
  /** The fake's IAM user, the only credentials its API accepts. */
  accessKeyId: string
  secretAccessKey: string
}
export type FakeEksProcess = FakeProgram<FakeEksLine>

/** Start test/support/fake-kube/serve.ts and read the one line it prints (its addresses and key pair). */
export const startFakeEksProcess = (program: string, checkout: string, env: NodeJS.ProcessEnv) =>
  startFakeProgram<FakeEksLine>("fake EKS", program, checkout, env)

/**
 * Where this environment has AWS credentials of its own (the sources the default provider chain
 * reads before an instance role), or undefined when it has none. Only names, never values.
 */
export function ownAwsCredentials(env: NodeJS.ProcessEnv, home: string): string | undefined {
  const variables = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
  ].filter((name) => env[name])
  if (variables.length > 0) return variables.join(", ")
  const files = [
    env.AWS_SHARED_CREDENTIALS_FILE || join(home, ".aws", "credentials"),
    env.AWS_CONFIG_FILE || join(home, ".aws", "config"),
  ].filter((file) => existsSync(file))
  return files.length > 0 ? files.join(", ") : undefined
}

/**
 * Give this process the fake's IAM user as its AWS credentials, unless it has its own (which the
 * plane's other eks backends may use, and which are left as they are). Returns where the own ones
 * are, or undefined when the fake's are now in use.
 */
export function useFakeEksCredentials(
  env: NodeJS.ProcessEnv,
  home: string,
  fake: FakeEksProcess,
): string | undefined {
  const own = ownAwsCredentials(env, home)
  if (own !== undefined) return own
  env.AWS_ACCESS_KEY_ID = fake.accessKeyId
  env.AWS_SECRET_ACCESS_KEY = fake.secretAccessKey
  return undefined
}

export const FakeEksBackend = "eks"
/** Marks the backend this program registered, so a later start points it at the new fake. */
const FakeEksDisplayName = "Fake EKS cluster (npm start)"

/**
 * Register (or repoint) the `eks` backend on the fake. An `eks` backend this program did not make is
 * left as it is; returns whether the backend is the fake's.
 */
export async function wireFakeEks(plane: LocalControlPlane, fake: FakeEksProcess): Promise<boolean> {
  const rt = plane.runtime
  const project = rt.operatorProject
  const existing = await rt.repos.backends.get(project, FakeEksBackend)
  if (existing && existing.config.displayName !== FakeEksDisplayName) return false
  const config = BackendConfig.parse({
    type: "eks",
    displayName: FakeEksDisplayName,
    clusterName: fake.clusterName,
    region: fake.region,
    endpoint: fake.eksUrl,
    namespace: fake.namespace,
    localQueue: fake.localQueue,
  })
  const { created } = await rt.repos.backends.put(project, FakeEksBackend, config)
  await rt.queue.send([
    { kind: "backend", project, id: FakeEksBackend, reason: created ? "backend.created" : "backend.updated" },
  ])
  return true
}
