import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LevelStore } from "../../src/storage/level/level-store.js";
import { MemoryStore, createMemoryData } from "../../src/storage/memory/memory-store.js";
import { describeStoreConformance } from "./store-conformance.js";

describeStoreConformance("memory", async () => {
  const data = createMemoryData();
  const store = new MemoryStore(data);
  await store.open();
  return {
    store,
    reopen: async () => {
      await store.close();
      const next = new MemoryStore(data);
      await next.open();
      return next;
    },
    cleanup: async () => {},
  };
});

describeStoreConformance("leveldb", async () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-store-"));
  let current = new LevelStore(dir);
  await current.open();
  return {
    store: current,
    reopen: async () => {
      await current.close();
      current = new LevelStore(dir);
      await current.open();
      return current;
    },
    cleanup: async () => {
      await current.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
