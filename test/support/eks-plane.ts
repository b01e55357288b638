/**
 * Test support: a local control plane in this process (fast ticks) beside a fake EKS cluster running
 * Kueue, and the helpers the eks suite uses (register a backend on the fake, submit, wait for the end,
 * restart the plane on the same data). The plane reaches the cluster as a Lambda would: with the
 * process's own AWS credentials (the default provider chain reads the standard environment variables,
 * set here to the fake's IAM user), DescribeCluster at the backend's `endpoint`, then a signed token.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { defaultUser, type FakeKube, type FakeKubeOptions, startFakeKube } from "./fake-kube"
import { type RestartablePlane, restartablePlane } from "./plane"

export interface EksPlane extends Omit<RestartablePlane, "register"> {
  fake: FakeKube
  /** An eks backend config for the fake, with `extra` fields over it. */
  config(extra?: Record<string, unknown>): Record<string, unknown>
  /** Register an eks backend on the fake. */
  register(id: string, extra?: Record<string, unknown>): Promise<void>
}

export async function eksPlane(options: FakeKubeOptions = {}): Promise<EksPlane> {
  // The function's own credentials, as the default provider chain finds them on a Lambda.
  process.env.AWS_ACCESS_KEY_ID = defaultUser.accessKeyId
  process.env.AWS_SECRET_ACCESS_KEY = defaultUser.secretAccessKey
  delete process.env.AWS_SESSION_TOKEN
  delete process.env.AWS_PROFILE
  const fake = await startFakeKube(options)
  const dir = mkdtempSync(join(tmpdir(), "swarmplane-eks-"))
  const r = await restartablePlane(dir)
  const config = (extra: Record<string, unknown> = {}) => ({
    type: "eks",
    clusterName: fake.clusterName,
    region: fake.region,
    endpoint: fake.eksUrl,
    namespace: "team-a",
    localQueue: "user-queue",
    ...extra,
  })
  return {
    get p() {
      return r.p
    },
    dir,
    fake,
    config,
    register: (id, extra) => r.register(id, config(extra)),
    job: r.job,
    submit: r.submit,
    finished: (id, timeoutMs = 45_000) => r.finished(id, timeoutMs),
    restart: r.restart,
    async stop() {
      await r.stop()
      await fake.stop()
    },
  }
}
