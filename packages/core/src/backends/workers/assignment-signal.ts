/**
 * The assignment signal: the reconcile pass says "work for worker W was committed", and a heartbeat
 * held open for W (a long-poll) answers at once instead of at its next re-read of the store. It is
 * in-process only: where the API and the reconcile pass run in one process (the local control plane)
 * placements reach a waiting agent at once; where they are different Lambdas the held heartbeat's
 * re-reads of the store (`held-heartbeat.ts`) find them. `createRuntime` builds the implementation.
 */

export interface AssignmentSignal {
  /** Attempts for these workers of `project` were committed (after the write). Never throws. */
  committed(project: string, workerIds: Iterable<string>): void
  /** A mark to pass to `next`: commits after it wake the waiter, even one that starts waiting later. */
  mark(): number
  /**
   * Resolves true once a commit for `workerId` after `since` is signalled (at once if one already
   * was), false when `abort` fires (the waiter is then forgotten). Never rejects.
   */
  next(project: string, workerId: string, since: number, abort: AbortSignal): Promise<boolean>
}
