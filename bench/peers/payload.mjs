/**
 * The job arguments every peer gets: one JSON object of about 100 bytes, the same for Worq
 * (`args: [object]`) and BullMQ (`data: object`), with a sequence number.
 */
export function jobArgs(seq) {
  return {
    seq,
    user: `user-${String(seq % 1_000_000).padStart(6, "0")}`,
    email: `user${String(seq % 1_000_000).padStart(6, "0")}@example.com`,
    plan: "pro",
    ts: 1_763_780_000_000 + seq,
  };
}

export const JOB_TYPE = "bench.noop";
