import { existsSync } from "node:fs";
import type { Command } from "commander";
import { CliError, EXIT, usageError } from "../exit-codes.js";
import { print } from "../output.js";

/**
 * Commands that work on a store directly, with no server running on it: `migrate` (the
 * PostgreSQL schema) and `migrate-store` (copy LevelDB <-> PostgreSQL). The storage code is
 * imported on demand, so client commands do not load it.
 */
export function registerStoreAdmin(program: Command): void {
  program
    .command("migrate")
    .summary("apply the PostgreSQL schema migrations (worq serve --store also does, on start)")
    .description("Applies the Worq schema migrations a PostgreSQL database lacks, in one transaction, and prints what it did.")
    .option("--store <url>", "the database, e.g. postgres://worq@db:5432/worq [WORQ_STORE]")
    .addHelpText("after", "\nExample:\n  worq migrate --store postgres://worq@db.internal:5432/worq")
    .action(async (flags: { store?: string }) => {
      const url = flags.store ?? process.env.WORQ_STORE;
      const { isPostgresUrl, redactedUrl } = await import("../../storage/postgres/url.js");
      if (!url || !isPostgresUrl(url)) throw usageError("--store <postgres://…> (or WORQ_STORE) is required");
      const { migrateDatabase } = await import("../../storage/postgres/migrations.js");
      const outcome = await migrateDatabase(url).catch((error: Error) => {
        throw new CliError(error.message, EXIT.failed);
      });
      for (const { version, name } of outcome.applied) print(`applied migration ${version}: ${name}`);
      print(
        outcome.applied.length === 0
          ? `${redactedUrl(url)} is at schema version ${outcome.version}: nothing to apply`
          : `${redactedUrl(url)} is now at schema version ${outcome.version}`,
      );
    });

  program
    .command("migrate-store")
    .summary("copy every job and setting from one store to another (LevelDB <-> PostgreSQL)")
    .description(
      "Copies jobs (live and finished, with bodies and results), queues and their paused flags, idempotency claims, pending webhooks and totals from one store into an empty one. Stop the server first: neither store may be in use.",
    )
    .requiredOption("--from <dir|url>", "the source: a LevelDB data dir or a postgres:// URL")
    .requiredOption("--to <dir|url>", "the destination, empty: a LevelDB data dir or a postgres:// URL")
    .addHelpText("after", "\nExample:\n  worq migrate-store --from ./worq-data --to postgres://worq@db.internal:5432/worq")
    .action(async (flags: { from: string; to: string }) => {
      const { isPostgresUrl } = await import("../../storage/postgres/url.js");
      if (!isPostgresUrl(flags.from) && !existsSync(flags.from)) throw usageError(`--from: no data dir at ${flags.from}`);
      const { storeAt } = await import("../../storage/open-store.js");
      const { copyStore } = await import("../../storage/copy-store.js");
      const from = storeAt(flags.from);
      const to = storeAt(flags.to);
      try {
        await from.store.open();
        await to.store.open();
        const copied = await copyStore(from.store, to.store);
        const finished = Object.entries(copied.finishedJobs).map(([state, count]) => `${count} ${state}`);
        print(`copied ${from.location} -> ${to.location}`);
        print(`  queues               ${copied.queues}`);
        print(`  live jobs            ${copied.liveJobs}`);
        print(`  finished jobs        ${finished.length === 0 ? "0" : finished.join(", ")}`);
        print(`  results              ${copied.results}`);
        print(`  idempotency claims   ${copied.idempotencyClaims}`);
        print(`  pending webhooks     ${copied.callbacks}`);
        print(`  schedules            ${copied.schedules}`);
        print(`  batches              ${copied.batches}`);
      } catch (error) {
        throw new CliError((error as Error).message, EXIT.failed);
      } finally {
        await Promise.all([from.store.close().catch(() => {}), to.store.close().catch(() => {})]);
      }
    });
}
