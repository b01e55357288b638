/**
 * How each domyn-swarm `backend:` field of a swarm file maps onto swarmplane (docs/cli.md has the same
 * table): onto `serving.<type>` options, onto the swarm's own fields, onto the registered backend's
 * config (an error that says where it goes), or ignored because swarmplane does that itself.
 */

export const ServingTypes = ["slurm", "lepton", "eks", "workers"] as const
export type ServingType = (typeof ServingTypes)[number]

export type Rule =
  /** → `serving.<type>.<field>` */
  | { serving: string }
  /** → the swarm's own `image` (when it names none) or `env` (merged) */
  | { top: "image" | "env" }
  /** set on the registered backend instead: an error naming the backend field */
  | { backend: string }
  /** swarmplane does this itself: a warning */
  | { ignored: string }
  /** an object whose fields have their own rules */
  | { nested: Record<string, Rule> }

const nginx = { ignored: "swarmplane's router replaces domyn-swarm's nginx load balancer" }
const ray = {
  ignored:
    "a replica larger than a node spans nodes (gpus_per_replica over gpus_per_node: serving.slurm.nodesPerReplica); the server starts on the first, and your command starts Ray across SLURM_JOB_NODELIST",
}
const watchdog = {
  ignored:
    "swarmplane watches replicas itself: one that exits is restarted, one that keeps failing before it is ready fails the swarm with the reason",
}
const scripts = { ignored: "swarmplane writes its own job scripts" }

const slurm: Record<string, Rule> = {
  partition: { serving: "partition" },
  time_limit: { serving: "timeLimit" },
  timeLimit: { serving: "timeLimit" },
  router_port: { serving: "routerPort" },
  routerPort: { serving: "routerPort" },
  account: { backend: "`account`" },
  qos: { backend: "`qos`" },
  modules: { backend: "`setup` (one `module load NAME` line each)" },
  preamble: { backend: "`extraSbatch` or `setup`" },
  exclude_nodes: { backend: "`extraSbatch` (`--exclude=NODES`)" },
  node_list: { backend: "`extraSbatch` (`--nodelist=NODES`)" },
  mail_user: { backend: "`extraSbatch` (`--mail-user=ADDRESS`)" },
  requeue: { ignored: "swarmplane restarts lost replicas itself" },
  env: { top: "env" },
  mounts: {
    backend:
      "`container.extraArgs` (for apptainer `--bind SRC:DST`, for enroot `--mount SRC:DST`), or a shared file system the nodes see",
  },
  watchdog,
  requires_ray: ray,
  ray_port: ray,
  ray_dashboard_port: ray,
  template_path: scripts,
  nginx_template_path: scripts,
  endpoint: {
    nested: {
      port: { serving: "routerPort" },
      wall_time: { ignored: "the router runs with the replicas' time limit (time_limit)" },
      cpus_per_task: nginx,
      mem: nginx,
      threads_per_core: nginx,
      enable_proxy_buffering: nginx,
      nginx_timeout: nginx,
      nginx_worker_processes: nginx,
      nginx_upstream_keepalive: nginx,
      nginx_image: nginx,
      collector_port: nginx,
      qos: nginx,
      poll_interval: nginx,
      require_allocated_node: nginx,
      monitoring: { ignored: "swarmplane has no Prometheus sidecars" },
    },
  },
}

const lepton: Record<string, Rule> = {
  workspace_id: { backend: "`workspaceId`" },
  resource_shape: { serving: "resourceShape" },
  resourceShape: { serving: "resourceShape" },
  env: { top: "env" },
  job: { ignored: "job settings belong to each job (swarmplane job submit --image ..., or a job file)" },
  endpoint: {
    nested: {
      resource_shape: { serving: "resourceShape" },
      image: { top: "image" },
      env: { top: "env" },
      allowed_dedicated_node_groups: { backend: "`nodeGroup`" },
      mounts: { backend: "`mounts`" },
      api_token_secret_name: { backend: "`endpointTokenSecret`" },
      image_pull_secrets: { backend: "`imagePullSecrets`" },
      allowed_nodes: { ignored: "swarmplane does not pin replicas to nodes" },
    },
  },
}

/** Per type; a type without rules (`eks`, `workers`) takes its `serving.<type>` fields as written. */
export const BackendRules: Record<ServingType, Record<string, Rule> | undefined> = {
  slurm,
  lepton,
  eks: undefined,
  workers: undefined,
}
