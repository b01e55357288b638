/**
 * zod, extended with `.openapi()`: every schema module takes `z` from here. `@hono/zod-openapi`
 * extends zod when it is evaluated and re-exports zod's own `z`; a bundler that splits code may take
 * that `z` straight from zod and run a schema module before the extension (`.openapi is not a
 * function` at import). `z` here is this module's own binding, so whatever uses it runs this first.
 */
import { extendZodWithOpenApi } from "@hono/zod-openapi"
import { z as zod } from "zod"

extendZodWithOpenApi(zod)

// An alias of the namespace (its types too, `z.infer<...>`), emitted as this module's own `const`.
export import z = zod
