import { admin } from "./api.js";

/**
 * The Overview's charts are sampled in the browser: every 5 s while a dashboard tab is open,
 * from GetServerInfo's counters and ListQueues' depths. The server keeps no history. Samples
 * of the last hour are kept in sessionStorage, so they survive reloads of the tab.
 */
export interface Sample {
  atMs: number;
  processed: number;
  failed: number;
  /** Unfinished jobs (ready, delayed, in flight, retrying, pending) per queue. */
  depth: Record<string, number>;
}

const KEY = "worq.samples";
const WINDOW_MS = 3_600_000;
export const SAMPLE_EVERY_MS = 5_000;

let samples: Sample[] = load();

function load(): Sample[] {
  try {
    const parsed = JSON.parse(sessionStorage.getItem(KEY) ?? "[]") as Sample[];
    return Array.isArray(parsed) ? parsed : [];
  } catch {
    return [];
  }
}

export function history(): readonly Sample[] {
  return samples;
}

/** Takes one sample now; errors propagate (the caller shows them). */
export async function sample(): Promise<void> {
  const [info, queues] = await Promise.all([admin.getServerInfo({}), admin.listQueues({ pageSize: 1000 })]);
  const depth: Record<string, number> = {};
  for (const q of queues.queues) depth[q.queue] = Number(q.ready + q.delayed + q.inFlight + q.retrying + q.pending);
  const now = Date.now();
  const last = samples.at(-1);
  // A counter going down means another server (or a wiped data dir): start over.
  if (last && (Number(info.totalProcessed) < last.processed || Number(info.totalFailed) < last.failed)) samples = [];
  samples.push({ atMs: now, processed: Number(info.totalProcessed), failed: Number(info.totalFailed), depth });
  samples = samples.filter((s) => s.atMs >= now - WINDOW_MS);
  try {
    sessionStorage.setItem(KEY, JSON.stringify(samples));
  } catch {
    // Storage full: the samples still live in memory.
  }
}
