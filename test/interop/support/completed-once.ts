import { expect } from "vitest";
import { JobState, type WorqClient } from "@worq/client";
import type { WorkerProcess } from "../../conformance/worker-process.js";

/**
 * Waits for each job of `expected` (jid → the result its handler returns) and checks it
 * completed with that result, and that the `workers` started each exactly once in all.
 */
export async function expectCompletedOnce(producer: WorqClient, expected: Map<string, string>, workers: WorkerProcess[]): Promise<void> {
  for (const [jid, result] of expected) {
    const job = await producer.waitResult(jid, 30_000);
    expect(job.state, jid).toBe(JobState.COMPLETED);
    expect(new TextDecoder().decode(job.result), jid).toBe(result);
  }
  const starts = new Map<string, number>();
  for (const worker of workers) {
    for (const event of worker.events) if (event.event === "start" && event.jid) starts.set(event.jid, (starts.get(event.jid) ?? 0) + 1);
  }
  expect([...expected.keys()].filter((jid) => starts.get(jid) !== 1)).toEqual([]);
}
