/**
 * How a node joins the Faktory replies of several partitions' servers into the one reply its
 * client reads (faktory-router.ts): pure functions over the JSON those servers send.
 */

/**
 * The elements of a JSON array's text, each exactly as written (numbers keep every digit).
 * `text` must be a JSON array (JSON.parse took it).
 */
export function splitJsonArray(text: string): string[] {
  const elements: string[] = [];
  let depth = 0;
  let inString = false;
  let start = -1;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') {
      inString = true;
      if (depth === 1 && start === -1) start = i;
    } else if (c === "[" || c === "{") {
      if (depth === 1 && start === -1) start = i;
      depth++;
    } else if (c === "]" || c === "}") {
      depth--;
      if (depth === 0 && start !== -1) elements.push(text.slice(start, i).trim());
    } else if (c === "," && depth === 1) {
      elements.push(text.slice(start, i).trim());
      start = -1;
    } else if (depth === 1 && start === -1 && !/\s/.test(c!)) start = i;
  }
  return elements;
}

/** The state a BEAT answers for a worker: the strongest any server says (terminate over quiet over running). */
export function strongestState(states: readonly ("running" | "quiet" | "terminate")[]): "running" | "quiet" | "terminate" {
  if (states.includes("terminate")) return "terminate";
  return states.includes("quiet") ? "quiet" : "running";
}

/** QUEUE LATENCY's answers joined: each queue's oldest wait, over every partition that has it. */
export function mergeLatency(answers: readonly Record<string, number>[]): Record<string, number> {
  const merged: Record<string, number> = {};
  for (const answer of answers) {
    for (const [queue, seconds] of Object.entries(answer)) {
      Object.defineProperty(merged, queue, {
        value: Math.max(merged[queue] ?? 0, seconds),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  return merged;
}

interface FaktoryInfo {
  now?: string;
  server_utc_time?: string;
  faktory?: {
    queues?: Record<string, number>;
    sets?: Record<string, number>;
    tasks?: Record<string, Record<string, number>>;
    total_failures?: number;
    total_processed?: number;
    total_enqueued?: number;
    total_queues?: number;
  };
  server?: Record<string, unknown>;
}

/**
 * INFO's answers joined: queue sizes, set sizes and totals added up over the partitions (a
 * spread queue's sizes too); the worker count is the most any one says, as every partition
 * hears each worker; the connections and commands are the node's own.
 */
export function mergeInfo(answers: readonly FaktoryInfo[], node: { connections: number; commandCount: number }): FaktoryInfo {
  const first = answers[0] ?? {};
  const queues: Record<string, number> = {};
  const sets: Record<string, number> = {};
  const tasks: Record<string, Record<string, number>> = {};
  const totals = { total_failures: 0, total_processed: 0, total_enqueued: 0 };
  let uptime = 0;
  let memory = 0;
  for (const answer of answers) {
    const faktory = answer.faktory ?? {};
    for (const [queue, size] of Object.entries(faktory.queues ?? {})) {
      Object.defineProperty(queues, queue, { value: (queues[queue] ?? 0) + size, enumerable: true, writable: true, configurable: true });
    }
    for (const [set, size] of Object.entries(faktory.sets ?? {})) sets[set] = (sets[set] ?? 0) + size;
    for (const [task, figures] of Object.entries(faktory.tasks ?? {})) {
      const into = (tasks[task] ??= {});
      for (const [figure, value] of Object.entries(figures)) {
        into[figure] = task === "Workers" ? Math.max(into[figure] ?? 0, value) : (into[figure] ?? 0) + value;
      }
    }
    for (const key of Object.keys(totals) as (keyof typeof totals)[]) totals[key] += faktory[key] ?? 0;
    uptime = Math.max(uptime, Number(answer.server?.uptime ?? 0));
    memory += Number(answer.server?.used_memory_mb ?? 0);
  }
  return {
    ...(first.now !== undefined && { now: first.now }),
    ...(first.server_utc_time !== undefined && { server_utc_time: first.server_utc_time }),
    faktory: { queues, sets, tasks, ...totals, total_queues: Object.keys(queues).length },
    server: {
      ...first.server,
      uptime,
      connections: node.connections,
      command_count: node.commandCount,
      used_memory_mb: memory,
    },
  };
}
