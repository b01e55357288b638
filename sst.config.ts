/// <reference path="./.sst/platform/config.d.ts" />
/**
 * SST app for swarmplane. It only composes `infra/*`; each module creates its resources when
 * imported, in dependency order. Production keeps its resources on `sst remove` (`removal: "retain"`).
 */
export default $config({
  app(input) {
    return {
      name: "swarmplane",
      // Production keeps everything on `sst remove`; other stages keep only the table (its own
      // `retainOnDelete`, infra/storage.ts).
      removal: input?.stage === "production" ? "retain" : "remove",
      home: "aws",
      // Pinned: unpinned, `sst install` takes whatever @pulumi/aws is latest on npm that day, so
      // types and deploys would drift between machines. 7.20.0 is what sst 4.17.1 ships with.
      // After changing it, run `scripts/sst-typecheck.sh --reinstall`.
      providers: { aws: "7.20.0" },
    }
  },
  async run() {
    await import("./infra/secrets")
    const storage = await import("./infra/storage")
    const queue = await import("./infra/queue")
    const schedule = await import("./infra/schedule")
    const api = await import("./infra/api")
    await import("./infra/ticks")

    return {
      api: api.api.url,
      table: storage.table.name,
      queue: queue.queue.url,
      queueName: queue.queue.nodes.queue.name,
      // The execution roles of the functions whose passes reach EKS clusters (`clusters: true` in
      // infra/), for the clusters' access entries. The API's role is its own component's; the
      // consumer's is its Lambda function's execution role. (The reconcile cron runs no pass.)
      clusterRoles: [
        api.api.nodes.role.arn,
        schedule.consumer.nodes.function.apply((fn) => fn.nodes.role.arn),
      ],
    }
  },
})
