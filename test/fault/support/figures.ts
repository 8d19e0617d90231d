import { Code, ConnectError } from "@connectrpc/connect";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import type { WorqClients } from "../../e2e/support/clients.js";

/**
 * The Jepsen total-queue classification of a fault run:
 * lost = acknowledged but gone; stuck = acknowledged, still there, never completed;
 * duplicated = jobs that ran more than once (allowed: at-least-once, but reported).
 */
export interface Figures {
  acknowledged: number;
  completed: number;
  lost: number;
  stuck: number;
  duplicated: number;
  executions: number;
}

/** Counts runs per jid from worker lines "run <jid> <attempt>". */
export function executionsPerJob(lines: Iterable<string>): Map<string, number> {
  const runs = new Map<string, number>();
  for (const line of lines) {
    if (!line.startsWith("run ")) continue;
    const jid = line.split(" ")[1]!;
    runs.set(jid, (runs.get(jid) ?? 0) + 1);
  }
  return runs;
}

/** The acknowledged jids of producer lines "ack <jid>". */
export function acknowledgedJids(lines: Iterable<string>): string[] {
  const jids: string[] = [];
  for (const line of lines) if (line.startsWith("ack ")) jids.push(line.slice(4));
  return jids;
}

/**
 * Polls the server until every acknowledged job is COMPLETED, or until no job completed for
 * `stallMs` (longer than the orphan grace and the leases, so a job still open then is stuck,
 * not merely queued behind a backlog), then classifies them. Uses GetJob per job (the
 * server's own view, not the workers').
 */
export async function settle(
  clients: WorqClients,
  acknowledged: readonly string[],
  runs: () => Map<string, number>,
  stallMs: number,
): Promise<Figures & { lostJids: string[]; stuckJids: string[] }> {
  let open = [...new Set(acknowledged)];
  let progressAt = Date.now();
  const lostJids: string[] = [];
  for (;;) {
    const still: string[] = [];
    for (let i = 0; i < open.length; i += 200) {
      const slice = open.slice(i, i + 200);
      const states = await Promise.all(
        slice.map((jid) =>
          clients.admin.getJob({ jid }).then(
            (reply) => reply.job!.state,
            (error: unknown) => {
              if (error instanceof ConnectError && error.code === Code.NotFound) return undefined;
              throw error;
            },
          ),
        ),
      );
      slice.forEach((jid, k) => {
        if (states[k] === undefined) lostJids.push(jid);
        else if (states[k] !== JobState.COMPLETED) still.push(jid);
      });
    }
    if (still.length < open.length) progressAt = Date.now();
    open = still;
    if (open.length === 0 || Date.now() - progressAt > stallMs) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const executed = runs();
  const unique = new Set(acknowledged).size;
  return {
    acknowledged: unique,
    completed: unique - lostJids.length - open.length,
    lost: lostJids.length,
    stuck: open.length,
    duplicated: [...executed.values()].filter((n) => n > 1).length,
    executions: [...executed.values()].reduce((a, b) => a + b, 0),
    lostJids,
    stuckJids: open,
  };
}

/** One line of figures, the form the README's Guarantees section quotes. */
export function printFigures(name: string, fields: Record<string, number | string>): void {
  const text = Object.entries(fields)
    .map(([key, value]) => `${key}=${value}`)
    .join(" ");
  process.stdout.write(`\n[figures] ${name}: ${text}\n`);
}
