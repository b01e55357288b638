/**
 * The `eks` backend end to end: a local control plane (fast ticks) in this process, a fake EKS cluster
 * running Kueue whose pods are real local processes, and the backend registered through swarmplane's
 * API. Jobs are admitted within the ClusterQueue's quota and run, wait with Kueue's words while over
 * it, fail with an OOMKilled pod's reason and are retried, are preempted and requeued, are cancelled
 * (the Job deleted with Background propagation), and a create whose answer was lost is adopted. A gang
 * is one Indexed Job Kueue admits whole or not at all, and a member's failure retries it whole. A
 * refused identity is the backend's error and does not hold another backend up; an expired token is
 * signed again.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { request as httpsRequest } from "node:https"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { jobName } from "@swarmplane/core/backends/eks/spec"
import { createBackend } from "@swarmplane/core/backends/registry"
import { JobSpec } from "@swarmplane/core/model/job"
import { afterAll, beforeAll, describe, expect, test } from "vitest"
import { assignedRefs } from "./support/assigned"
import { type EksPlane, eksPlane } from "./support/eks-plane"
import { Types, workloadName } from "./support/fake-kube"
import { hasKubectl } from "./support/kubectl"
import { until } from "./support/plane"

const execFileAsync = promisify(execFile)

let e: EksPlane
/** How far the cluster's clock is ahead of this process's (the token test moves it). */
const skew = { ms: 0 }

beforeAll(async () => {
  e = await eksPlane({
    now: () => Date.now() + skew.ms,
    clusterQueues: [
      {
        name: "cluster-queue",
        flavors: [{ name: "default-flavor", nominalQuota: { cpu: 2, memory: "8Gi" } }],
      },
      {
        name: "other-queue",
        flavors: [{ name: "other-flavor", nominalQuota: { cpu: 2, memory: "8Gi" } }],
        preemption: "LowerPriority",
      },
    ],
    localQueues: [
      { namespace: "team-a", name: "user-queue", clusterQueue: "cluster-queue" },
      { namespace: "team-b", name: "user-queue", clusterQueue: "other-queue" },
    ],
  })
  await e.register("k8s")
}, 60_000)

afterAll(async () => {
  await e?.stop()
})

/** Small tasks: four fit the ClusterQueue's 2 CPUs. */
const small = { cpu: 0.5, memoryMiB: 256 }

/** The HTTP status of a pod list with this bearer token, trusting only the cluster's CA. */
function statusWith(token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      new URL("/api/v1/namespaces/team-a/pods", e.fake.server),
      { headers: { authorization: `Bearer ${token}` }, ca: e.fake.caPem },
      (res) => {
        res.resume()
        res.on("end", () => resolve(res.statusCode ?? 0))
      },
    )
    req.once("error", reject)
    req.end()
  })
}

/** The job's first task, once it runs. */
const runningTask = (id: string) =>
  until(
    `job ${id}'s task to run`,
    async () => {
      const t = (await e.job(id)).tasks[0]
      return t.state === "RUNNING" && t
    },
    30_000,
  )

/** A request to the cluster's API as kubectl makes it (a valid token, the cluster CA). */
async function kubeApi(
  method: string,
  path: string,
): Promise<{ status: number; json: { items?: { metadata: { name: string } }[] } }> {
  const token = await e.fake.token()
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      new URL(path, e.fake.server),
      { method, headers: { authorization: `Bearer ${token}` }, ca: e.fake.caPem },
      (res) => {
        let body = ""
        res.setEncoding("utf8")
        res.on("data", (chunk) => {
          body += chunk
        })
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, json: body ? JSON.parse(body) : undefined }),
        )
      },
    )
    req.once("error", reject)
    req.end()
  })
}

const jobsOf = (namespace: string) =>
  e.fake.requests.filter(
    (r) => r.method === "POST" && r.path === `/apis/batch/v1/namespaces/${namespace}/jobs`,
  )

describe("jobs", () => {
  test("a 4-task job admitted within quota runs to SUCCEEDED, one suspended Job per task labelled for the LocalQueue", {
    timeout: 60_000,
  }, async () => {
    const id = await e.submit("k8s", {
      tasks: 4,
      resources: small,
      env: { GREETING: "hello" },
      command: ["sh", "-c", 'echo "$GREETING from shard $SHARD_ID of $NSHARDS"'],
    })
    const done = await e.finished(id)
    expect(done.status).toBe("SUCCEEDED")
    const detail = (await e.p.call("GET", `/v1/jobs/${id}/tasks`)).json
    const tasks = detail.items ?? detail.tasks ?? detail
    expect(tasks).toHaveLength(4)
    for (const task of tasks) {
      const attempt = task.attempts.at(-1)
      const job = e.fake.object(Types.jobs, "team-a", attempt.target) as {
        metadata: object
        spec: { backoffLimit: number; suspend: boolean }
      }
      expect(job.metadata).toMatchObject({
        name: jobName(attempt.attemptUid),
        labels: { "kueue.x-k8s.io/queue-name": "user-queue", "swarmplane.dev/backend": "k8s" },
      })
      expect(job.spec.backoffLimit).toBe(0)
    }
    const logs = (await e.p.call("GET", `/v1/jobs/${id}/tasks/2/logs?tail=5`)).json
    expect(logs.lines).toEqual(["hello from shard 2 of 4"])
  })

  test("a job over the ClusterQueue's quota waits with Kueue's words until quota frees, then runs", {
    timeout: 60_000,
  }, async () => {
    const first = await e.submit("k8s", { tasks: 4, resources: small, command: ["sh", "-c", "sleep 4"] })
    await until(
      "the first job to run",
      async () => (await e.job(first)).tasks.every((t: { state: string }) => t.state === "RUNNING"),
      30_000,
    )
    const second = await e.submit("k8s", { resources: small, command: ["sh", "-c", "echo second"] })
    const waiting = await until(
      "the second job to wait for quota",
      async () => {
        const j = await e.job(second)
        return /insufficient unused quota/.test(j.tasks[0].pendingReason ?? "") && j
      },
      30_000,
    )
    expect(waiting.tasks[0].pendingReason).toMatch(/^Kueue: couldn't assign flavors to pod set main/)
    expect(["PENDING", "ASSIGNED"]).toContain(waiting.tasks[0].state)
    expect((await e.finished(first)).status).toBe("SUCCEEDED")
    expect((await e.finished(second)).status).toBe("SUCCEEDED")
  })

  test("an OOMKilled pod FAILS its attempt with the reason, and the task is retried within its budget", {
    timeout: 60_000,
  }, async () => {
    e.fake.scriptTermination({ podPrefix: "sp-", reason: "OOMKilled", exitCode: 137 })
    const id = await e.submit("k8s", {
      resources: small,
      maxRetriesFailure: 1,
      command: ["sh", "-c", "echo working; sleep 2"],
    })
    const done = await e.finished(id)
    expect(done.status).toBe("SUCCEEDED")
    const [first, second] = done.tasks[0].attempts
    expect(first).toMatchObject({ state: "FAILED", exitCode: 137 })
    expect(first.message).toMatch(/OOMKilled/)
    expect(second.state).toBe("SUCCEEDED")
  })

  test("a preempted Workload: the attempt is PREEMPTED, its Job deleted, and the task requeued to SUCCEED", {
    timeout: 60_000,
  }, async () => {
    const id = await e.submit("k8s", { resources: small, command: ["sh", "-c", "sleep 3; echo done"] })
    const running = await runningTask(id)
    const target: string = running.attempts[0].target
    const job = e.fake.object(Types.jobs, "team-a", target) as { metadata: { uid: string } }
    e.fake.evictWorkload("team-a", workloadName(target, job.metadata.uid), {
      message: "Preempted to accommodate a workload due to prioritization in the ClusterQueue",
    })
    const done = await e.finished(id)
    expect(done.status).toBe("SUCCEEDED")
    const [first, second] = done.tasks[0].attempts
    expect(first.state).toBe("PREEMPTED")
    expect(first.message).toMatch(/Preempted to accommodate/)
    expect(second.state).toBe("SUCCEEDED")
    await until(
      "the preempted Job to be deleted",
      async () => !e.fake.object(Types.jobs, "team-a", target),
      20_000,
    )
  })

  test("a pod deleted while it runs: the attempt is WORKER_FAILED (not the program's failure) and the task is retried to SUCCEED", {
    timeout: 60_000,
  }, async () => {
    const id = await e.submit("k8s", {
      resources: small,
      maxRetriesFailure: 0,
      command: ["sh", "-c", "sleep 4; echo done"],
    })
    const running = await runningTask(id)
    const target: string = running.attempts[0].target
    // As `kubectl delete pod` would: find the Job's pod by its label, then delete it.
    const pods = await kubeApi(
      "GET",
      `/api/v1/namespaces/team-a/pods?labelSelector=${encodeURIComponent(`batch.kubernetes.io/job-name=${target}`)}`,
    )
    expect(pods.json.items).toHaveLength(1)
    const pod = pods.json.items?.[0]?.metadata.name
    const deleted = await kubeApi("DELETE", `/api/v1/namespaces/team-a/pods/${pod}`)
    expect(deleted.status).toBe(200)
    const done = await e.finished(id)
    expect(done.status).toBe("SUCCEEDED")
    const [first, second] = done.tasks[0].attempts
    expect(first).toMatchObject({ state: "WORKER_FAILED", reason: "pod_lost" })
    expect(first.message).toMatch(/deleted before it ended/)
    expect(second.state).toBe("SUCCEEDED")
  })

  test("an image that cannot be pulled FAILS the attempt after the backend's imagePullGraceS, with Kubernetes' reason", {
    timeout: 60_000,
  }, async () => {
    await e.register("k8s-pull", { imagePullGraceS: 1 })
    e.fake.failImagePull("registry.example/missing:1")
    const id = await e.submit("k8s-pull", {
      resources: small,
      image: "registry.example/missing:1",
      command: ["true"],
    })
    const done = await e.finished(id)
    expect(done.status).toBe("FAILED")
    expect(done.tasks[0].attempts[0]).toMatchObject({ state: "FAILED", reason: "image_pull" })
    // Kubernetes' words, naming the image (while in the grace it is the task's pending reason: states.test.ts).
    expect(done.tasks[0].attempts[0].message).toMatch(
      /(ErrImagePull|ImagePullBackOff).*registry\.example\/missing:1/,
    )
  })

  test("cancel of a running job: KILLED, and its Job deleted with Background propagation", {
    timeout: 60_000,
  }, async () => {
    const id = await e.submit("k8s", { resources: small, command: ["sleep", "300"] })
    const running = await runningTask(id)
    const target: string = running.attempts[0].target
    expect((await e.p.call("POST", `/v1/jobs/${id}/cancel`)).status).toBe(202)
    const done = await e.finished(id)
    expect(done.status).toBe("CANCELLED")
    expect(done.tasks[0].state).toBe("KILLED")
    await until("the Job to be deleted", async () => !e.fake.object(Types.jobs, "team-a", target), 20_000)
    const deletes = e.fake.requests.filter(
      (r) => r.method === "DELETE" && r.path === `/apis/batch/v1/namespaces/team-a/jobs/${target}`,
    )
    expect(deletes.length).toBeGreaterThan(0)
    for (const d of deletes) expect(d.query).toContain("propagationPolicy=Background")
  })
})

describe.skipIf(!hasKubectl())("kubectl", () => {
  test("kubectl pointed at the cluster lists, describes and deletes the Jobs and pods swarmplane made", {
    timeout: 60_000,
  }, async () => {
    const id = await e.submit("k8s", { resources: small, command: ["sh", "-c", "echo seen-by-kubectl"] })
    const done = await e.finished(id)
    expect(done.status).toBe("SUCCEEDED")
    const name: string = done.tasks[0].attempts[0].target
    const dir = mkdtempSync(join(tmpdir(), "swarmplane-eks-kubectl-"))
    const kubeconfig = join(dir, "config")
    writeFileSync(kubeconfig, e.fake.kubeconfig(await e.fake.token()), { mode: 0o600 })
    // kubectl runs as a child process while the fake serves it from this one: never a sync exec here.
    const kubectl = async (...args: string[]) =>
      (
        await execFileAsync("kubectl", ["--kubeconfig", kubeconfig, "-n", "team-a", ...args], {
          encoding: "utf8",
        })
      ).stdout
    const selector = `swarmplane.dev/job=${id}`
    expect(await kubectl("get", "jobs", "-l", selector, "-o", "name")).toBe(`job.batch/${name}\n`)
    expect(await kubectl("get", "pods", "-l", selector)).toMatch(
      new RegExp(`${name}-\\w+\\s+0/1\\s+Completed`),
    )
    expect(await kubectl("describe", "job", name)).toMatch(/kueue\.x-k8s\.io\/queue-name=user-queue/)
    expect(await kubectl("logs", `job/${name}`)).toBe("seen-by-kubectl\n")
    expect(await kubectl("delete", "job", name)).toContain(`job.batch "${name}" deleted`)
    expect(e.fake.object(Types.jobs, "team-a", name)).toBeUndefined()
    rmSync(dir, { recursive: true, force: true })
  })
})

/** The gang Job an attempt belongs to: its `submission` is `<job>#<completion index>`. */
const gangJobOf = (attempt: { submission?: string; target?: string }) =>
  String(attempt.target ?? attempt.submission).split("#")[0]!

describe("gangs", () => {
  test("a 3-member gang with room for 2 in the ClusterQueue waits whole (none runs), then runs all 3 once quota frees", {
    timeout: 90_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "eks-gang-"))
    try {
      const go = join(dir, "go")
      // Holds 1 of the 2 CPUs until told to end: room for 2 of the gang's 3 half-CPU members.
      const blocker = await e.submit("k8s", {
        resources: { cpu: 1, memoryMiB: 256 },
        command: ["sh", "-c", `while [ ! -e '${go}' ]; do sleep 0.2; done`],
      })
      await until(
        "the blocker to run",
        async () => (await e.job(blocker)).tasks[0].state === "RUNNING",
        30_000,
      )
      const gang = await e.submit("k8s", {
        tasks: 3,
        coscheduling: {},
        resources: small,
        command: ["sh", "-c", 'echo "member $SHARD_ID attempt $ATTEMPT_UID"'],
      })
      const waiting = await until(
        "the gang to wait for quota",
        async () => {
          const j = await e.job(gang)
          return (
            j.tasks.length === 3 &&
            j.tasks.every((t: { pendingReason?: string }) =>
              /insufficient unused quota/.test(t.pendingReason ?? ""),
            ) &&
            j
          )
        },
        30_000,
      )
      expect(waiting.tasks.map((t: { state: string }) => t.state)).not.toContain("RUNNING")
      const names = new Set(
        waiting.tasks.map((t: { attempts: { submission: string }[] }) => gangJobOf(t.attempts.at(-1)!)),
      )
      expect(names.size).toBe(1)
      const held = e.fake.object(Types.jobs, "team-a", [...names][0] as string) as {
        spec: { suspend: boolean; completionMode: string; parallelism: number; completions: number }
        status?: { active?: number }
      }
      expect(held.spec).toMatchObject({
        suspend: true,
        completionMode: "Indexed",
        parallelism: 3,
        completions: 3,
      })
      expect(held.status?.active ?? 0).toBe(0)

      writeFileSync(go, "")
      expect((await e.finished(blocker)).status).toBe("SUCCEEDED")
      const done = await e.finished(gang)
      expect(done.status).toBe("SUCCEEDED")
      for (const task of done.tasks) {
        expect(task.attempts).toHaveLength(1)
        const logs = (await e.p.call("GET", `/v1/jobs/${gang}/tasks/${task.index}/logs?tail=5`)).json
        expect(logs.lines).toEqual([`member ${task.index} attempt ${task.attempts[0].attemptUid}`])
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test("a gang whose member fails is retried whole (its gang-mates stopped, their Job deleted) and SUCCEEDS", {
    timeout: 90_000,
  }, async () => {
    const dir = mkdtempSync(join(tmpdir(), "eks-gang-"))
    try {
      const failed = join(dir, "failed")
      const go = join(dir, "go")
      // Member 1 fails its first run; its second run lets the others end. Members 0 and 2 wait for
      // that, so their first run can only end by being stopped.
      const script = [
        `if [ "$SHARD_ID" = 1 ]; then`,
        `  if [ ! -e '${failed}' ]; then touch '${failed}'; exit 3; fi`,
        `  touch '${go}'; exit 0`,
        "fi",
        `while [ ! -e '${go}' ]; do sleep 0.2; done`,
      ].join("\n")
      const id = await e.submit("k8s", {
        tasks: 3,
        coscheduling: {},
        resources: small,
        maxRetriesFailure: 1,
        command: ["sh", "-c", script],
      })
      const done = await e.finished(id)
      expect(done.status).toBe("SUCCEEDED")
      const byIndex = new Map(done.tasks.map((t: { index: number }) => [t.index, t])) as Map<
        number,
        { attempts: { state: string; submission: string; target?: string; exitCode?: number }[] }
      >
      expect(byIndex.get(1)!.attempts.map((a) => a.state)).toEqual(["FAILED", "SUCCEEDED"])
      expect(byIndex.get(1)!.attempts[0]!.exitCode).toBe(3)
      for (const i of [0, 2])
        expect(byIndex.get(i)!.attempts.map((a) => a.state)).toEqual(["KILLED", "SUCCEEDED"])
      const first = new Set([...byIndex.values()].map((t) => gangJobOf(t.attempts[0]!)))
      const second = new Set([...byIndex.values()].map((t) => gangJobOf(t.attempts[1]!)))
      expect(first.size).toBe(1)
      expect(second.size).toBe(1)
      expect([...first][0]).not.toBe([...second][0])
      await until(
        "the first gang Job to be deleted",
        async () => !e.fake.object(Types.jobs, "team-a", [...first][0]!),
        20_000,
      )
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe("batching", () => {
  test("20 tasks are observed with a few LISTs per pass (Jobs, pods, Workloads), never a read per task", {
    timeout: 60_000,
  }, async () => {
    const start = e.fake.requests.length
    const id = await e.submit("k8s", { tasks: 20, resources: { cpu: 0.1, memoryMiB: 64 }, command: ["true"] })
    expect((await e.finished(id)).status).toBe("SUCCEEDED")
    const seen = e.fake.requests.slice(start)
    const single = seen.filter(
      (r) => r.method === "GET" && /\/namespaces\/team-a\/(jobs|workloads)\/[^/]+$/.test(r.path),
    )
    expect(single).toEqual([])
    const lists = (plural: string) =>
      seen.filter((r) => r.method === "GET" && r.path.endsWith(`/namespaces/team-a/${plural}`)).length
    // Every pass lists each kind once; the pod lists of a log read (one per failed task) add none here.
    expect(lists("jobs")).toBeGreaterThan(0)
    expect(lists("workloads")).toBe(lists("jobs"))
    expect(lists("pods")).toBe(lists("jobs"))
    // Far fewer than a read per task per pass.
    expect(lists("jobs")).toBeLessThan(60)
  })
})

describe("adoption", () => {
  test("a second launch of the same attempts (a create whose answer was lost) adopts the Job instead of making another", {
    timeout: 60_000,
  }, async () => {
    const record = (await e.p.call("GET", "/v1/backends/k8s")).json
    const runtime = e.p.plane.runtime
    const backend = await createBackend(record, runtime)
    const created = await runtime.transitions.jobs.create(
      "default",
      "job-adopt-test",
      JobSpec.parse({ command: ["sleep", "30"], tasks: 2, resources: small }),
      "other",
    )
    const tasks = (await runtime.repos.jobs.load("default", created.id))!.tasks
    const refs = tasks.map((task) => ({ job: created, task }))
    let minted = 0
    const plan = await backend.schedule({
      pending: refs,
      live: [],
      mintAttemptUid: () => `a-adopt-${minted++}`,
    })
    expect(plan.assignments.map((a) => a.submission)).toEqual([jobName("a-adopt-0"), jobName("a-adopt-1")])
    const assigned = assignedRefs(plan, created.createdAt)
    const first = await backend.launch({ attempts: assigned })
    const again = await backend.launch({ attempts: assigned })
    expect(first.failed).toEqual([])
    expect(first.launched.map((x) => x.target)).toEqual([jobName("a-adopt-0"), jobName("a-adopt-1")])
    expect(again.launched.map((x) => x.target)).toEqual(first.launched.map((x) => x.target))
    expect(again.failed).toEqual([])
    const ours = e.fake.object(Types.jobs, "team-a", jobName("a-adopt-0")) as { metadata: { labels: object } }
    expect(ours.metadata.labels).toMatchObject({ "swarmplane.dev/attempt": "a-adopt-0" })
    await backend.stop(
      first.launched.map((x) => ({ kind: "stop" as const, attemptUid: "", target: x.target })),
    )
    await backend.close()
    for (const { target } of first.launched)
      expect(e.fake.object(Types.jobs, "team-a", target)).toBeUndefined()
  })

  test("a gang's second launch adopts its one Indexed Job; one member's stop deletes it for all", {
    timeout: 60_000,
  }, async () => {
    const record = (await e.p.call("GET", "/v1/backends/k8s")).json
    const runtime = e.p.plane.runtime
    const backend = await createBackend(record, runtime)
    const created = await runtime.transitions.jobs.create(
      "default",
      "job-gang-adopt-test",
      JobSpec.parse({ command: ["sleep", "30"], tasks: 3, coscheduling: {}, resources: small }),
      "other",
    )
    const tasks = (await runtime.repos.jobs.load("default", created.id))!.tasks
    let minted = 0
    const plan = await backend.schedule({
      pending: tasks.map((task) => ({ job: created, task })),
      live: [],
      mintAttemptUid: () => `a-gang-${minted++}`,
    })
    const name = jobName("a-gang-0")
    expect(plan.assignments.map((a) => a.submission).sort()).toEqual([`${name}#0`, `${name}#1`, `${name}#2`])
    const assigned = assignedRefs(plan, created.createdAt)
    const posts = jobsOf("team-a").length
    const first = await backend.launch({ attempts: assigned })
    const again = await backend.launch({ attempts: assigned })
    expect(first.failed).toEqual([])
    expect(first.launched.map((x) => x.target).sort()).toEqual([`${name}#0`, `${name}#1`, `${name}#2`])
    expect(again.failed).toEqual([])
    expect(again.launched.map((x) => x.target).sort()).toEqual(first.launched.map((x) => x.target).sort())
    // One create per launch: the second answered 409 and adopted the first's Job.
    expect(jobsOf("team-a").length - posts).toBe(2)
    const ours = e.fake.object(Types.jobs, "team-a", name) as { spec: { completions: number } }
    expect(ours.spec.completions).toBe(3)
    await backend.stop([{ kind: "stop" as const, attemptUid: "", target: `${name}#1` }])
    await backend.close()
    expect(e.fake.object(Types.jobs, "team-a", name)).toBeUndefined()
  })

  test("a create answered 503 is deferred and the rest of the launch with it; nothing is created past the lease", {
    timeout: 60_000,
  }, async () => {
    const record = (await e.p.call("GET", "/v1/backends/k8s")).json
    const runtime = e.p.plane.runtime
    const created = await runtime.transitions.jobs.create(
      "default",
      "job-defer-test",
      JobSpec.parse({ command: ["true"], tasks: 2, resources: small }),
      "other",
    )
    const tasks = (await runtime.repos.jobs.load("default", created.id))!.tasks
    const assigned = tasks.map((task, i) => ({
      job: created,
      task: {
        ...task,
        data: {
          ...task.data,
          state: "ASSIGNED" as const,
          attempts: [
            {
              attemptUid: `a-defer-${i}`,
              state: "ASSIGNED" as const,
              submission: jobName(`a-defer-${i}`),
              createdAt: created.createdAt,
            },
          ],
        },
      },
    }))
    const posts = jobsOf("team-a").length
    const backend = await createBackend(record, runtime)
    const late = await backend.launch({ attempts: assigned, deadline: Date.now() - 1 })
    expect(late.launched).toEqual([])
    expect(late.deferred?.map((d) => d.ref)).toEqual(assigned)
    expect(jobsOf("team-a").length).toBe(posts)
    // Three 503s: the first create's call and its two retries; the second is not tried after it.
    e.fake.injectFault({
      status: 503,
      method: "POST",
      path: "/apis/batch/v1/namespaces/team-a/jobs",
      count: 3,
    })
    const away = await backend.launch({ attempts: assigned })
    expect(away.launched).toEqual([])
    expect(away.failed).toEqual([])
    expect(away.deferred).toHaveLength(2)
    expect(away.deferred![0]!.message).toMatch(/503/)
    expect(jobsOf("team-a").length).toBe(posts + 3)
    await backend.close()
    for (const i of [0, 1])
      expect(e.fake.object(Types.jobs, "team-a", jobName(`a-defer-${i}`))).toBeUndefined()
  })

  test("a plane restarted mid-job adopts the Jobs it had made: no second Job, and the job SUCCEEDS", {
    timeout: 60_000,
  }, async () => {
    const id = await e.submit("k8s", { tasks: 2, resources: small, command: ["sh", "-c", "sleep 2"] })
    await until(
      "both tasks to be submitted",
      async () =>
        (await e.job(id)).tasks.every((t: { attempts: { target?: string }[] }) => t.attempts[0]?.target),
      30_000,
    )
    const before = jobsOf("team-a").length
    await e.restart()
    const done = await e.finished(id)
    expect(done.status).toBe("SUCCEEDED")
    expect(done.tasks.map((t: { attempts: unknown[] }) => t.attempts.length)).toEqual([1, 1])
    expect(jobsOf("team-a").length).toBe(before)
  })
})

describe("faults", () => {
  test("a 403 is the backend's error in GET /v1/backends/{id} and does not stall another backend", {
    timeout: 90_000,
  }, async () => {
    await e.register("k8s-b", { namespace: "team-b" })
    e.fake.forbid({ resource: "jobs", namespace: "team-b" })
    const stuck = await e.submit("k8s-b", { resources: small, command: ["true"] })
    const fine = await e.submit("k8s", { resources: small, command: ["true"] })
    const backend = await until(
      "the refusal to show on the backend",
      async () => {
        const b = (await e.p.call("GET", "/v1/backends/k8s-b")).json
        return b.status?.healthy === false && b
      },
      30_000,
    )
    expect(backend.status.message).toMatch(/403|forbidden/i)
    expect((await e.finished(fine)).status).toBe("SUCCEEDED")
    expect((await e.job(stuck)).tasks[0].state).not.toBe("SUCCEEDED")
    expect((await e.p.call("GET", "/v1/backends/k8s")).json.status.healthy).toBe(true)
    const good = (await e.p.call("GET", "/v1/backends/k8s/status")).json
    expect(good.status).toMatchObject({
      healthy: true,
      detail: { localQueue: "user-queue", clusterQueue: { name: "cluster-queue" } },
    })
    // The permission is granted: the waiting job runs, with nothing to redo by hand.
    e.fake.allowAll()
    expect((await e.finished(stuck)).status).toBe("SUCCEEDED")
  })

  test("an expired token is signed again: the cluster's clock passes 15 minutes and the backend goes on", {
    timeout: 60_000,
  }, async () => {
    const record = (await e.p.call("GET", "/v1/backends/k8s")).json
    const runtime = e.p.plane.runtime
    const now = () => Date.now()
    expect((await (await createBackend(record, runtime)).status()).healthy).toBe(true)
    const tokenCalls = e.fake.requests.length
    // 16 minutes on, for the cluster and for the backend: the token of a minute ago has expired.
    skew.ms = 16 * 60_000
    const later = { now: () => now() + skew.ms, sleep: runtime.clock.sleep }
    const status = await (await createBackend(record, { ...runtime, clock: later })).status()
    expect(status, JSON.stringify(status)).toMatchObject({ healthy: true })
    expect(e.fake.requests.length).toBeGreaterThan(tokenCalls)
    // What the backend held before: a token dated by this process's clock, which the cluster refuses now.
    const stale = await e.fake.token({ signingDate: new Date(now()) })
    const refused = await statusWith(stale)
    skew.ms = 0
    expect(refused).toBe(401)
  })
})
