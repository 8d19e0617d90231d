/** The worker job envelope (?format=envelope): lifecycle examples, state mapping, submission. */
import { describe, expect, it } from "vitest";
import type { JobMeta, JobState } from "../../src/model/job.js";
import { envelopeOf, importEnvelope, submitInputFromEnvelope, type Envelope } from "../../src/formats/envelope.js";
import { JID, expectInvalid, failure, viewOf } from "./helpers.js";
import { SEED_002_EXAMPLES } from "./format-examples.js";

/** The engine's job at the point each example describes. */
const META_AT: Record<Envelope["state"], Partial<JobMeta>> = {
  enqueued: { state: "SCHEDULED", createdAtMs: 1672531200_000 },
  running: { state: "RUNNING", createdAtMs: 1672531200_000, startedAtMs: 1672531201_400 },
  done: { state: "COMPLETED", createdAtMs: 1672531200_000, startedAtMs: 1672531201_000, completedAtMs: 1672531205_999 },
  error: {
    state: "FAILED",
    createdAtMs: 1672531200_000,
    startedAtMs: 1672531201_000,
    completedAtMs: 1672531202_000,
    failure: failure({ errtype: "", message: "Timeout talking to worker", category: "TIMEOUT" }),
  },
};

describe("the worker job envelope (?format=envelope)", () => {
  it.each(Object.keys(SEED_002_EXAMPLES) as Envelope["state"][])("the %s example round-trips", (state) => {
    const example = SEED_002_EXAMPLES[state];
    const { input, clientJid, ignored } = importEnvelope(example);
    expect(clientJid).toBe("job-123");
    // ts_enqueued is kept as the creation time; state, the other ts_* and error describe the past: not part of a submission, and named.
    expect(input).toEqual({
      type: "backend.workers.tasks.worker_heartbeat",
      args: [],
      kwargs: { timestamp: 1672531200 },
      idempotencyKey: "job-123",
      createdAtMs: 1672531200_000,
      documentFields: expect.objectContaining({ created_at: "ts_enqueued" }) as unknown,
    });
    expect(ignored).toEqual(Object.keys(example).filter((key) => ["state", "ts_started", "ts_finished", "error"].includes(key)));
    const out = envelopeOf(viewOf(input, META_AT[state]));
    // The envelope's job_id is the queue's own id: the server's jid, whatever the producer sent.
    expect(out).toEqual({ ...example, job_id: JID });
    expect(Object.values(out).every((v) => v === null || typeof v !== "number" || Number.isInteger(v))).toBe(true);
  });

  it("ts_enqueued is when the producer enqueued the job, not its latest retry: it stays before ts_started", () => {
    // A job created at T, first run at T+1, failed, re-enqueued for its retry at T+10 and running again since T+11.
    const out = envelopeOf(
      viewOf({ type: "T" }, { state: "RUNNING", createdAtMs: 1672531200_000, enqueuedAtMs: 1672531210_000, startedAtMs: 1672531211_000 }),
    );
    expect(out.ts_enqueued).toBe(1672531200);
    expect(out.ts_enqueued).toBeLessThanOrEqual(out.ts_started!);
  });

  it.each<[JobState, Envelope["state"]]>([
    ["SCHEDULED", "enqueued"],
    ["DELAYED", "enqueued"],
    ["PENDING", "enqueued"],
    ["RETRYING", "enqueued"],
    ["RUNNING", "running"],
    ["COMPLETED", "done"],
    ["FAILED", "error"],
    ["DEAD_LETTER", "error"],
    ["CANCELLED", "error"],
  ])("state %s is %s", (state, expected) => {
    const out = envelopeOf(viewOf({ type: "T" }, { state }));
    expect(out.state).toBe(expected);
    if (expected === "error") expect(out.error).toBe(state);
    else expect(out.error).toBeUndefined();
  });

  it("error is `errtype: message` of the last failure", () => {
    const view = viewOf({ type: "T" }, { state: "DEAD_LETTER", failure: failure({ errtype: "KeyError", message: "no such user" }) });
    expect(envelopeOf(view).error).toBe("KeyError: no such user");
    const typeOnly = viewOf({ type: "T" }, { state: "DEAD_LETTER", failure: failure({ errtype: "KeyError", message: "" }) });
    expect(envelopeOf(typeOnly).error).toBe("KeyError");
  });

  it("always writes args and kwargs, empty when the job has none", () => {
    const out = envelopeOf(viewOf({ type: "T" }));
    expect(out.args).toEqual([]);
    expect(out.kwargs).toEqual({});
  });

  it("tolerates extra keys on import, and drops them, naming them", () => {
    const document = { job_path: "p", args: [1], kwargs: {}, ts_iso: "2026-01-01T00:00:00Z", state: "bogus" };
    expect(submitInputFromEnvelope(document)).toEqual({ type: "p", args: [1], kwargs: {} });
    expect(importEnvelope(document).ignored).toEqual(["ts_iso", "state"]);
  });

  it("names the JSON field of bad input", () => {
    expectInvalid(() => submitInputFromEnvelope(42), "job");
    expectInvalid(() => submitInputFromEnvelope({ args: [], kwargs: {} }), "job_path");
    expectInvalid(() => submitInputFromEnvelope({ job_path: "", args: [], kwargs: {} }), "job_path");
    expectInvalid(() => submitInputFromEnvelope({ job_path: "p", kwargs: {} }), "args");
    expectInvalid(() => submitInputFromEnvelope({ job_path: "p", args: [] }), "kwargs");
    expectInvalid(() => submitInputFromEnvelope({ job_path: "p", args: [], kwargs: [] }), "kwargs");
    expectInvalid(() => submitInputFromEnvelope({ job_path: "p", args: [], kwargs: {}, job_id: 1 }), "job_id");
  });
});
