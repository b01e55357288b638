import { storeContract } from "./contract"
import { MemoryStore } from "./memory"

storeContract("memory", async () => ({ store: MemoryStore() }))
