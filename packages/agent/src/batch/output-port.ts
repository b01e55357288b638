/**
 * The `OutputStore` port: a run's output as a folder of whole files named relative to it
 * (`shard-0/progress.json`), whatever holds it. Its adapters import this, never each other.
 */

/** A folder of whole files. Names are relative, `/`-separated, and never start with `/`. */
export interface OutputStore {
  /** The output as given (`out`, `s3://bucket/prefix`), for messages. */
  readonly location: string
  /** The files directly in folder `dir`, in UTF-8 binary order; none when it is empty or absent. */
  list(dir: string): Promise<string[]>
  /** The text of `name`; undefined when it does not exist. */
  read(name: string): Promise<string | undefined>
  /** Create or replace `name` whole: a reader sees the old text or the new one, never a part. */
  write(name: string, text: string): Promise<void>
  /** Where `name` is, for messages and results: a path, or an `s3://` URL. */
  where(name: string): string
  /** Release connections. Idempotent. */
  close(): void
}

/** S3's key order: by UTF-8 bytes (JavaScript's default sort is by UTF-16 units). */
export const binaryOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b))
