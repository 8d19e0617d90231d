/**
 * The latency marks (bench/diag/latency-breakdown.mjs reads them): while something listens on
 * the `worq:latency` channel, one submit and its pickup through a real server and the TS
 * library publish each step, in the order the job passes them; with no listener, nothing.
 */
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Worker, WorqClient } from "@worq/client";
import type { LatencyMark } from "@worq/client/latency-marks.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";

describe("latency marks on the worq:latency channel", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server?.close();
  });

  it("mark each step of a submit and its pickup, in order, on both sides", async () => {
    const marks: LatencyMark[] = [];
    const listener = (mark: unknown) => marks.push(mark as LatencyMark);
    subscribe("worq:latency", listener);
    const client = new WorqClient({ address: `127.0.0.1:${server.port}` });
    const worker = new Worker({ client, queues: ["marks"], concurrency: 1, handleSignals: false });
    let handled!: () => void;
    const ran = new Promise<void>((resolve) => (handled = resolve));
    worker.register("probe", () => handled());
    const running = worker.run();
    try {
      marks.length = 0;
      const jid = await client.submit("probe", { queue: "marks" });
      await ran;
      expect(jid).toBeTruthy();
      /** The first mark of `step` (with `detail`), at or after `from`. */
      const at = (step: string, detail?: string, from = 0n) => {
        const found = marks.find((mark) => mark.step === step && (detail === undefined || mark.detail === detail) && mark.at >= from);
        expect(found, `${step} ${detail ?? ""}`).toBeDefined();
        return found!.at;
      };
      const submit = "/worq.v1.ProducerService/Submit";
      const order = [
        at("client.call", submit),
        at("client.sent", submit),
        at("lane.read", submit),
        at("rpc.received", "Submit"),
        at("store.write"),
        at("store.written"),
        at("rpc.answering", "Submit"),
        at("rpc.answered", "Submit"),
        at("client.trailers", submit),
        at("client.closed", submit),
      ];
      expect([...order].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(order);
      // The job's way to the worker: leased after the submit arrived, written to the stream, read.
      const delivered = at("lease.deliver", undefined, at("rpc.received", "Submit"));
      const written = at("stream.written", "Lease", delivered);
      expect(at("client.data", "/worq.v1.WorkerService/Lease", written)).toBeGreaterThan(written);
    } finally {
      unsubscribe("worq:latency", listener);
      await worker.stop();
      await running;
    }
    const before = marks.length;
    await client.submit("probe", { queue: "unheard" });
    expect(marks.length).toBe(before); // nobody listens: nothing is published
  });
});
