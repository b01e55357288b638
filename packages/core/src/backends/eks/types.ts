/**
 * The Kubernetes and Kueue objects the eks backend reads and writes, as TypeScript types: only the
 * fields backend-contracts.md Parts C and D list (batch/v1 Job, v1 Pod, apps/v1 Deployment, v1
 * Service, and Kueue's v1beta1 Workload, LocalQueue and ClusterQueue), all optional where the API
 * server may leave them out. They are read from the backend's own cluster and not validated field by
 * field; the one untrusted shape that drives control flow, a `Status` error, is read in api-error.ts.
 */

export interface OwnerReference {
  apiVersion: string
  kind: string
  name: string
  uid: string
  controller?: boolean
  blockOwnerDeletion?: boolean
}

export interface ObjectMeta {
  name?: string
  generateName?: string
  namespace?: string
  uid?: string
  resourceVersion?: string
  generation?: number
  creationTimestamp?: string
  deletionTimestamp?: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
  ownerReferences?: OwnerReference[]
  finalizers?: string[]
}

/** `metav1.Condition`, and the older condition shapes of Job and Pod (which add probe times). */
export interface Condition {
  type: string
  status: "True" | "False" | "Unknown"
  reason?: string
  message?: string
  lastTransitionTime?: string
  observedGeneration?: number
}

export interface KubeObject {
  apiVersion?: string
  kind?: string
  metadata: ObjectMeta
}

export interface ListMeta {
  resourceVersion?: string
  continue?: string
  remainingItemCount?: number
}

export interface KubeList<T> {
  apiVersion?: string
  kind?: string
  metadata?: ListMeta
  items: T[]
}

/** Quantities as the API gives them ("8", "200Gi", "500m"). */
export type ResourceList = Record<string, string>

export interface Container {
  name: string
  image: string
  command?: string[]
  args?: string[]
  env?: { name: string; value?: string }[]
  workingDir?: string
  ports?: { name?: string; containerPort: number; protocol?: string }[]
  resources?: { requests?: ResourceList; limits?: ResourceList }
  readinessProbe?: { httpGet?: { path?: string; port: number | string }; periodSeconds?: number }
  /** `preStop.sleep` (Kubernetes 1.30+): the kubelet waits this long before it stops the container. */
  lifecycle?: { preStop?: { sleep?: { seconds: number } } }
}

export interface Toleration {
  key?: string
  operator?: "Exists" | "Equal"
  value?: string
  effect?: "NoSchedule" | "PreferNoSchedule" | "NoExecute"
}

export interface PodSpec {
  containers: Container[]
  restartPolicy?: "Always" | "OnFailure" | "Never"
  serviceAccountName?: string
  nodeSelector?: Record<string, string>
  tolerations?: Toleration[]
  /** Passed through as given (node affinity from constraints). */
  affinity?: Record<string, unknown>
  priorityClassName?: string
  schedulingGates?: { name: string }[]
  terminationGracePeriodSeconds?: number
}

export interface PodTemplateSpec {
  metadata?: ObjectMeta
  spec: PodSpec
}

export interface Job extends KubeObject {
  spec?: {
    parallelism?: number
    completions?: number
    completionMode?: "NonIndexed" | "Indexed"
    backoffLimit?: number
    activeDeadlineSeconds?: number
    ttlSecondsAfterFinished?: number
    suspend?: boolean
    selector?: { matchLabels?: Record<string, string> }
    template: PodTemplateSpec
  }
  status?: {
    active?: number
    ready?: number
    succeeded?: number
    failed?: number
    terminating?: number
    startTime?: string
    completionTime?: string
    completedIndexes?: string
    failedIndexes?: string
    /** `Suspended`, `Complete`, `Failed`, `FailureTarget`, `SuccessCriteriaMet`. */
    conditions?: Condition[]
  }
}

export type PodPhase = "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown"

export interface ContainerState {
  waiting?: { reason?: string; message?: string }
  running?: { startedAt?: string }
  terminated?: {
    exitCode: number
    signal?: number
    /** `Completed`, `Error`, `OOMKilled`, `ContainerCannotRun`, `DeadlineExceeded`, `StartError`. */
    reason?: string
    message?: string
    startedAt?: string
    finishedAt?: string
    containerID?: string
  }
}

export interface ContainerStatus {
  name: string
  ready: boolean
  restartCount: number
  image?: string
  imageID?: string
  containerID?: string
  started?: boolean
  state?: ContainerState
  lastState?: ContainerState
}

export interface Pod extends KubeObject {
  spec?: PodSpec & { nodeName?: string }
  status?: {
    phase?: PodPhase
    /** Pod-level reason: `Evicted`, `DeadlineExceeded`, `UnexpectedAdmissionError`, `Preempting`. */
    reason?: string
    message?: string
    podIP?: string
    startTime?: string
    /** `PodScheduled`, `Initialized`, `ContainersReady`, `Ready`, `DisruptionTarget`, ... */
    conditions?: Condition[]
    containerStatuses?: ContainerStatus[]
    initContainerStatuses?: ContainerStatus[]
  }
}

export interface Deployment extends KubeObject {
  spec?: {
    replicas?: number
    selector: { matchLabels?: Record<string, string> }
    template: PodTemplateSpec
    strategy?: {
      type?: "RollingUpdate" | "Recreate"
      rollingUpdate?: { maxSurge?: number | string; maxUnavailable?: number | string }
    }
  }
  status?: {
    observedGeneration?: number
    replicas?: number
    updatedReplicas?: number
    readyReplicas?: number
    availableReplicas?: number
    unavailableReplicas?: number
    /** `Available`, `Progressing`, `ReplicaFailure`. */
    conditions?: Condition[]
  }
}

export interface Service extends KubeObject {
  spec?: {
    type?: "ClusterIP" | "NodePort" | "LoadBalancer"
    selector?: Record<string, string>
    ports: {
      name?: string
      port: number
      targetPort?: number | string
      protocol?: string
      nodePort?: number
    }[]
    clusterIP?: string
  }
  status?: { loadBalancer?: { ingress?: { ip?: string; hostname?: string }[] } }
}

/** A Kueue resource quantity per resource name, per flavor. */
export interface FlavorResources {
  name: string
  resources: { name: string; total?: string; borrowed?: string }[]
}

export interface PodSetAssignment {
  name: string
  flavors?: Record<string, string>
  resourceUsage?: ResourceList
  count?: number
}

export interface Workload extends KubeObject {
  spec?: {
    queueName?: string
    priorityClassName?: string
    priority?: number
    priorityClassSource?: string
    active?: boolean
    maximumExecutionTimeSeconds?: number
    podSets?: { name: string; count: number; minCount?: number; template?: PodTemplateSpec }[]
  }
  status?: {
    /** `QuotaReserved`, `Admitted`, `Evicted`, `Preempted`, `Requeued`, `PodsReady`, `Finished`. */
    conditions?: Condition[]
    admission?: { clusterQueue: string; podSetAssignments?: PodSetAssignment[] } | null
    requeueState?: { count?: number; requeueAt?: string }
    resourceRequests?: { name: string; resources?: ResourceList }[]
    admissionChecks?: { name: string; state: string; message?: string; lastTransitionTime?: string }[]
    schedulingStats?: { evictions?: { reason: string; underlyingCause?: string; count: number }[] }
  }
}

/** What LocalQueues and ClusterQueues both report. */
export interface QueueStatus {
  conditions?: Condition[]
  pendingWorkloads?: number
  reservingWorkloads?: number
  admittedWorkloads?: number
  flavorsReservation?: FlavorResources[]
}

export interface LocalQueue extends KubeObject {
  spec?: { clusterQueue: string; stopPolicy?: string }
  status?: QueueStatus & {
    /** Singular on LocalQueue v1beta1 (`flavorsUsage` on ClusterQueue). */
    flavorUsage?: FlavorResources[]
    flavors?: { name: string; resources?: string[]; nodeLabels?: Record<string, string> }[]
  }
}

export interface ClusterQueue extends KubeObject {
  spec?: {
    cohort?: string
    queueingStrategy?: string
    stopPolicy?: string
    resourceGroups?: {
      coveredResources: string[]
      flavors: {
        name: string
        resources: { name: string; nominalQuota: string; borrowingLimit?: string; lendingLimit?: string }[]
      }[]
    }[]
    preemption?: Record<string, unknown>
  }
  status?: QueueStatus & { flavorsUsage?: FlavorResources[] }
}

/** Kubernetes' `Status`: the body of every error answer (and of some deletes). */
export interface Status {
  kind: "Status"
  apiVersion?: string
  status?: "Success" | "Failure"
  message?: string
  reason?: string
  code?: number
  details?: {
    name?: string
    group?: string
    kind?: string
    uid?: string
    causes?: { reason?: string; message?: string; field?: string }[]
    retryAfterSeconds?: number
  }
}
