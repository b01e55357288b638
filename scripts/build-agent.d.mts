/** Bundles the worker agent into one file runnable with plain `node`; returns the file's path. */
export function buildAgent(outfile?: string): Promise<string>
