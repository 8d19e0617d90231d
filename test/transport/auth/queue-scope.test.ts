import { describe, expect, it } from "vitest";
import { WorqError } from "../../../src/model/errors.js";
import { ALL_QUEUES, checkJobInScope, checkQueueInScope, parseQueueScope } from "../../../src/transport/auth/queue-scope.js";
import { scopedMetricsText } from "../../../src/transport/auth/scoped-metrics.js";

describe("queue scopes", () => {
  it("match whole queue names; * matches any run of characters, the empty one included", () => {
    const scope = parseQueueScope("billing.*,invoices,*-eu,a*b*c");
    const allowed = ["billing.eu", "billing.eu.retry", "billing.", "invoices", "x-eu", "-eu", "abc", "aXbYc", "abbc"];
    const refused = ["billing", "billingX", "invoices2", "xinvoices", "x-eu2", "ab", "acb", "default"];
    for (const queue of allowed) expect(scope.allows(queue), queue).toBe(true);
    for (const queue of refused) expect(scope.allows(queue), queue).toBe(false);
  });

  it("treat . and - literally, not as regular expression syntax", () => {
    const scope = parseQueueScope("a.b,c-d");
    expect([scope.allows("a.b"), scope.allows("aXb"), scope.allows("c-d"), scope.allows("cd")]).toEqual([true, false, true, false]);
  });

  it("read the same whatever the order and repeats: one canonical text, the idempotency namespace", () => {
    expect(parseQueueScope("invoices,billing.*,invoices").text).toBe("billing.*,invoices");
    expect(parseQueueScope("billing.*,invoices").text).toBe(parseQueueScope("invoices,billing.*").text);
    expect(parseQueueScope("billing.*").text).not.toBe(parseQueueScope("billing.*,invoices").text);
  });

  it("a lone * is every queue, the same as no scope", () => {
    expect(parseQueueScope("billing,*")).toBe(ALL_QUEUES);
    expect([ALL_QUEUES.all, ALL_QUEUES.text, ALL_QUEUES.allows("anything")]).toEqual([true, "", true]);
  });

  it.each(["", "billing,", "9lives", "bill ing", "bill/ing", "bill$"])("refuses the pattern list %j", (text) => {
    expect(() => parseQueueScope(text)).toThrow(/is not a queue pattern/);
  });

  it("a queue the caller names outside its scope is PERMISSION_DENIED naming the field", () => {
    const scope = parseQueueScope("billing.*");
    expect(() => checkQueueInScope(scope, "billing.eu", "jobs[2].queue")).not.toThrow();
    const error = (() => {
      try {
        checkQueueInScope(scope, "payroll", "jobs[2].queue");
      } catch (thrown) {
        return thrown as WorqError;
      }
    })();
    expect([error?.code, error?.field, error?.message]).toEqual([
      "WORQ_PERMISSION_DENIED",
      "jobs[2].queue",
      'jobs[2].queue: the queue "payroll" is outside this token\'s queues (billing.*)',
    ]);
  });

  it("a job outside the scope is NOT_FOUND, worded as for a jid that does not exist", () => {
    const jid = "6f1c0a3e-7d2b-4c1e-9a8f-0b1c2d3e4f50";
    expect(() => checkJobInScope(parseQueueScope("billing.*"), jid, "payroll")).toThrow(
      new WorqError("WORQ_NOT_FOUND", `job ${jid} not found`, "jid"),
    );
    expect(() => checkJobInScope(parseQueueScope("billing.*"), jid, "billing.eu")).not.toThrow();
  });
});

describe("/metrics for a scoped token", () => {
  const text = [
    "# HELP worq_jobs_submitted_total Jobs created.",
    "# TYPE worq_jobs_submitted_total counter",
    'worq_jobs_submitted_total{queue="billing.eu"} 3',
    'worq_jobs_submitted_total{queue="payroll"} 5',
    "",
    "# HELP worq_queue_depth Jobs per queue and state.",
    "# TYPE worq_queue_depth gauge",
    'worq_queue_depth{queue="payroll",state="ready"} 2',
    "",
    "# HELP worq_lease_latency_seconds Time to lease.",
    "# TYPE worq_lease_latency_seconds histogram",
    'worq_lease_latency_seconds_bucket{le="0.1",queue="billing.eu"} 1',
    'worq_lease_latency_seconds_bucket{le="+Inf",queue="payroll"} 1',
    'worq_lease_latency_seconds_count{queue="billing.eu"} 1',
    "",
    "# HELP worq_connected_workers Open Lease streams.",
    "# TYPE worq_connected_workers gauge",
    "worq_connected_workers 4",
    "",
  ].join("\n");

  it("keeps only samples of its queues, with their families' HELP and TYPE; drops samples without a queue label", () => {
    expect(scopedMetricsText(text, parseQueueScope("billing.*"))).toBe(
      [
        "# HELP worq_jobs_submitted_total Jobs created.",
        "# TYPE worq_jobs_submitted_total counter",
        'worq_jobs_submitted_total{queue="billing.eu"} 3',
        "# HELP worq_lease_latency_seconds Time to lease.",
        "# TYPE worq_lease_latency_seconds histogram",
        'worq_lease_latency_seconds_bucket{le="0.1",queue="billing.eu"} 1',
        'worq_lease_latency_seconds_count{queue="billing.eu"} 1',
        "",
      ].join("\n"),
    );
  });

  it("is the whole text for a token of every queue, and empty for a scope with no queue yet", () => {
    expect(scopedMetricsText(text, ALL_QUEUES)).toBe(text);
    expect(scopedMetricsText(text, parseQueueScope("nothing-here"))).toBe("");
  });
});
