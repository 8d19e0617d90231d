import { readdir, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { Store } from "../engine/store.js";
import type { JobMeta } from "../model/job.js";
import { LevelStore } from "./level/level-store.js";
import { PostgresStore } from "./postgres/postgres-store.js";
import { isPostgresUrl, redactedUrl } from "./postgres/url.js";

/** A store chosen by configuration, with what the server reports about it. */
export interface ConfiguredStore {
  store: Store;
  /** Where the data lives, for logs: the data dir, or the database URL without its password. */
  location: string;
  /** Bytes the data takes on disk (server info). */
  dataBytes(): Promise<number>;
}

/** What a store reports as it works. */
export interface StoreListeners {
  /** Hears of each durable write: seconds and operations. */
  onBatch?: (seconds: number, operations: number) => void;
  /** PostgreSQL: names the connections (a cluster finds its leader by it, src/cluster). */
  applicationName?: string;
  /** PostgreSQL: the writer connection (and the writer lock) was lost. */
  onWriterLost?: (error: Error) => void;
  /** PostgreSQL: one partition's fenced slice, for its owner at `epoch` (src/partition-host.ts). */
  partition?: { index: number; epoch: number };
  /** LevelDB, an engine of --engines: reads the metas of jobs in the other engines' stores (LevelStore.getMetasIn). */
  foreignMetas?: (partition: number, jids: readonly string[]) => Promise<(JobMeta | undefined)[]>;
}

/** The server's store: PostgreSQL when `store` (`--store`, WORQ_STORE) is given, else LevelDB in `dataDir`. */
export function createStore(config: { store?: string | undefined; dataDir: string }, listeners: StoreListeners = {}): ConfiguredStore {
  return storeAt(config.store ?? config.dataDir, listeners);
}

/** The store at `location`: a postgres:// URL, or else a LevelDB data dir. */
export function storeAt(location: string, listeners: StoreListeners = {}): ConfiguredStore {
  if (isPostgresUrl(location)) {
    const store = new PostgresStore(location, listeners);
    return { store, location: redactedUrl(location), dataBytes: readAtMostOncePer(DATA_BYTES_FRESH_MS, () => store.databaseBytes()) };
  }
  const dataDir = resolve(location);
  return {
    store: new LevelStore(dataDir, listeners.onBatch, listeners.foreignMetas),
    location: dataDir,
    dataBytes: readAtMostOncePer(DATA_BYTES_FRESH_MS, () => directoryBytes(dataDir)),
  };
}

/**
 * How old a data size server info shows may be. Server info is polled (dashboards, scripts,
 * a node merging every partition's): read each time, the size cost each partition a directory
 * walk or a PostgreSQL query per poll, a measurable share of a small CPU quota.
 */
const DATA_BYTES_FRESH_MS = 1_000;

/** `read`, called again only once its last answer is `freshMs` old; callers meanwhile share it. */
function readAtMostOncePer(freshMs: number, read: () => Promise<number>): () => Promise<number> {
  let last: { atMs: number; value: Promise<number> } | undefined;
  return () => {
    const now = Date.now();
    if (!last || now - last.atMs >= freshMs) {
      const value = read();
      last = { atMs: now, value };
      // A failed read is not kept: the next caller reads again.
      value.catch(() => {
        if (last?.value === value) last = undefined;
      });
    }
    return last.value;
  };
}

/** Total size of the files in `dir` (LevelDB keeps a flat directory). */
async function directoryBytes(dir: string): Promise<number> {
  const names = await readdir(dir).catch(() => []);
  const sizes = await Promise.all(
    names.map((name) =>
      stat(join(dir, name)).then(
        (s) => (s.isFile() ? s.size : 0),
        () => 0,
      ),
    ),
  );
  return sizes.reduce((a, b) => a + b, 0);
}
