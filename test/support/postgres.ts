import { execFileSync, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { freePort } from "./free-port.js";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { toolAvailable } from "./require-tool.js";

/**
 * A throwaway PostgreSQL cluster for one test file: `initdb` in a temp dir, `pg_ctl start` on
 * a free 127.0.0.1 port with its socket in that dir, trust auth for the role `worq`.
 * PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` user
 * (or `nobody`) and every command runs through `runuser`.
 */
export interface PostgresCluster {
  port: number;
  /** A new empty database; its postgres:// URL. */
  createDatabase(): Promise<string>;
  stop(): Promise<void>;
}

const BIN_DIRS = ["/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/14/bin"];

/** The directory holding initdb and pg_ctl, or undefined when PostgreSQL is not installed. */
function binDir(): string | undefined {
  const fromPath = spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" }).stdout.trim();
  if (fromPath && existsSync(join(fromPath, "..", "pg_ctl"))) return join(fromPath, "..");
  const versions = existsSync("/usr/lib/postgresql") ? readdirSync("/usr/lib/postgresql").map((v) => `/usr/lib/postgresql/${v}/bin`) : [];
  return [...BIN_DIRS, ...versions].find((dir) => existsSync(join(dir, "initdb")) && existsSync(join(dir, "pg_ctl")));
}

/** Whether PostgreSQL tests can run here; prints the one-line skip reason (or throws under WORQ_REQUIRE_ALL=1). */
export function postgresAvailable(): boolean {
  return toolAvailable(
    "PostgreSQL",
    () => binDir() !== undefined,
    "initdb/pg_ctl not found (bash scripts/install-postgres.sh installs them)",
  );
}

/** The unprivileged user to run the cluster as when we are root. */
function clusterUser(): string | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ["postgres", "nobody"]) {
    if (spawnSync("id", ["-u", name]).status === 0) return name;
  }
  throw new Error("running as root and neither a postgres nor a nobody user exists to run PostgreSQL as");
}

/** `durable`: fsync on, as a production primary runs (what bench/diag/pg-wal.mjs measures its commits with). */
export async function startPostgres(options: { durable?: boolean } = {}): Promise<PostgresCluster> {
  const bin = binDir();
  if (!bin) throw new Error("PostgreSQL binaries not found");
  const user = clusterUser();
  const dir = mkdtempSync(join(tmpdir(), "worq-pg-"));
  const dataDir = join(dir, "data");
  if (user) {
    const uid = Number(execFileSync("id", ["-u", user], { encoding: "utf8" }));
    const gid = Number(execFileSync("id", ["-g", user], { encoding: "utf8" }));
    chownSync(dir, uid, gid);
  }
  const run = (command: string, args: string[]) => {
    const [file, argv] = user ? ["runuser", ["-u", user, "--", join(bin, command), ...args]] : [join(bin, command), args];
    execFileSync(file, argv, { stdio: ["ignore", "pipe", "pipe"], cwd: dir, timeout: 120_000 });
  };
  // --no-sync and fsync=off: these tests kill Worq, never PostgreSQL, so PostgreSQL's own
  // flushes are not under test; they only slow a busy machine down.
  run("initdb", ["-D", dataDir, "-A", "trust", "-U", "worq", "--no-sync", "-E", "UTF8", "--locale", "C"]);
  const port = await freePort();
  const serverOptions = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=${options.durable ? "on" : "off"} -c max_connections=200`;
  run("pg_ctl", ["start", "-w", "-t", "60", "-D", dataDir, "-l", join(dir, "log"), "-o", serverOptions]);
  let databases = 0;
  const admin = new pg.Client({ host: "127.0.0.1", port, user: "worq", database: "postgres" });
  await admin.connect();
  return {
    port,
    async createDatabase() {
      const name = `worq_test_${++databases}`;
      await admin.query(`CREATE DATABASE ${name}`);
      return `postgres://worq@127.0.0.1:${port}/${name}`;
    },
    async stop() {
      await admin.end().catch(() => {});
      try {
        run("pg_ctl", ["stop", "-D", dataDir, "-m", "immediate"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
