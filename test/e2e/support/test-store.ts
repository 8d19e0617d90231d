import { afterAll } from "vitest";
import { startPostgres, type PostgresCluster } from "../../support/postgres.js";

/**
 * The store in-process test servers use: LevelDB in their data dir, or with
 * WORQ_TEST_STORE=postgres a database of a throwaway PostgreSQL cluster (one per test file,
 * one database per data dir, so a restart on the same dir finds its data):
 *   WORQ_TEST_STORE=postgres npx vitest run test/e2e
 */
let cluster: Promise<PostgresCluster> | undefined;
const databases = new Map<string, Promise<string>>();

// Registered when a test file imports this module, so it runs after the file's own
// afterAll hooks (stack order): the servers are closed before their database goes.
afterAll(async () => {
  if (cluster) await (await cluster).stop();
});

export async function databaseFor(dataDir: string): Promise<{ store?: string }> {
  if (process.env.WORQ_TEST_STORE !== "postgres") return {};
  cluster ??= startPostgres();
  let url = databases.get(dataDir);
  if (!url) {
    url = cluster.then((c) => c.createDatabase());
    databases.set(dataDir, url);
  }
  return { store: await url };
}

/** The store kind in-process test servers report in server info. */
export function testStoreKind(): string {
  return process.env.WORQ_TEST_STORE === "postgres" ? "postgres" : "leveldb";
}
