import { describe, expect, it } from "vitest";
import { decodeBinaryMeta, encodeBinaryMeta } from "../../src/model/meta-binary.js";
import { CollectingSink, flush, GatedStore, openEngine, single, submitOne } from "./helpers.js";

const MINUTE = 60_000;

describe("Detached leases (a door's reservations, as Faktory's FETCH takes them)", () => {
  it("keep their whole reserve_for when the session closes and across a restart; attached ones are cut to the orphan grace", async () => {
    const { engine, clock, data } = await openEngine({ orphanGraceMs: 10_000 });
    const reserved = await submitOne(engine, { type: "t", queue: "faktory", reserveForMs: 30 * MINUTE, executionTimeoutMs: 30 * MINUTE });
    const streamed = await submitOne(engine, { type: "t", queue: "grpc", reserveForMs: 30 * MINUTE });
    const detachedSink = new CollectingSink();
    const detached = engine.openLease({ queues: ["faktory"], workerId: "faktory:w:1", credits: 1, detached: true }, detachedSink);
    const attachedSink = new CollectingSink();
    const attached = engine.openLease({ queues: ["grpc"], workerId: "grpc-worker", credits: 1 }, attachedSink);
    await flush();
    expect(detachedSink.grantOf(reserved).meta.lease).toMatchObject({ detached: true, expiresAtMs: clock.nowMs() + 30 * MINUTE });
    expect(attachedSink.grantOf(streamed).meta.lease).not.toHaveProperty("detached");
    const leasedAt = clock.nowMs();
    detached.close();
    attached.close();
    expect((await engine.getJob(reserved)).meta.lease!.expiresAtMs).toBe(leasedAt + 30 * MINUTE);
    expect((await engine.getJob(streamed)).meta.lease!.expiresAtMs).toBe(leasedAt + 10_000);

    await flush();
    await engine.close();
    clock.advance(MINUTE);
    const restarted = await openEngine({ data, clock, orphanGraceMs: 10_000 });
    expect((await restarted.engine.getJob(reserved)).meta.lease).toMatchObject({ detached: true, expiresAtMs: leasedAt + 30 * MINUTE });
    expect((await restarted.engine.getJob(streamed)).meta.lease!.expiresAtMs).toBe(clock.nowMs() + 10_000);
    // The reservation is still held: an ack with its lease completes the job.
    await restarted.engine.ack(reserved, detachedSink.grantOf(reserved).meta.lease!.leaseId, new Uint8Array());
    expect((await restarted.engine.getJob(reserved)).meta.state).toBe("COMPLETED");
  });

  it("a job leased to a session that closed before its grant was pushed is ready again at once, its attempt not spent", async () => {
    const { engine, clock, data } = await openEngine({ orphanGraceMs: 10_000 });
    const jid = await submitOne(engine, { type: "t", queue: "faktory", reserveForMs: 30 * MINUTE, executionTimeoutMs: 30 * MINUTE });
    await flush();
    await engine.close();
    // After a restart the body is not in memory: the grant waits for a store read, and the
    // door's wait (Faktory's FETCH) can run out meanwhile.
    const { engine: restarted } = await openEngine({ data, clock, orphanGraceMs: 10_000 });
    const sink = new CollectingSink();
    const session = restarted.openLease({ queues: ["faktory"], workerId: "faktory:w:1", credits: 1, detached: true }, sink);
    expect((await restarted.getJob(jid)).meta.state).toBe("RUNNING");
    session.close();
    await flush();
    expect(sink.grants).toEqual([]);
    expect((await restarted.getJob(jid)).meta).toMatchObject({ state: "SCHEDULED", attempt: 0, lease: undefined });
    const again = new CollectingSink();
    restarted.openLease({ queues: ["faktory"], workerId: "faktory:w:2", credits: 1, detached: true }, again);
    await flush();
    expect(again.grantOf(jid).meta.attempt).toBe(1);
    // And so it is on disk: a restart finds it RUNNING under the second lease.
    await restarted.close();
    const { engine: third } = await openEngine({ data, clock, orphanGraceMs: 10_000 });
    expect((await third.getJob(jid)).meta.lease!.leaseId).toBe(again.grantOf(jid).meta.lease!.leaseId);
  });

  it("the binary meta record keeps the flag, and records without it read as attached", async () => {
    const { engine } = await openEngine();
    const jid = await submitOne(engine, { type: "t", queue: "q" });
    const sink = new CollectingSink();
    engine.openLease({ queues: ["q"], workerId: "w", credits: 1, detached: true }, sink);
    await flush();
    const meta = sink.grantOf(jid).meta;
    expect(decodeBinaryMeta(encodeBinaryMeta(meta, false)).lease).toEqual(meta.lease);
    const { detached: _detached, ...attachedLease } = meta.lease!;
    expect(decodeBinaryMeta(encodeBinaryMeta({ ...meta, lease: attachedLease }, false)).lease).toEqual(attachedLease);
  });
  it("a job delivered before its submit is durable reads back, and a report about it lands, once the submit is on disk", async () => {
    // Delivery does not wait for the submit's commit: on a slow disk a worker (a Faktory
    // client, whose ACK looks the job up first) can report before the job's body is stored.
    const store = new GatedStore();
    const { engine } = await openEngine({ store });
    const sink = new CollectingSink();
    engine.openLease({ queues: ["faktory"], workerId: "faktory:w:1", credits: 1, detached: true }, sink);
    store.stallCommits = true;
    const submitted = engine.submit([{ type: "t", queue: "faktory" }], single);
    await flush();
    const [grant] = sink.grants;
    expect(grant).toBeDefined();
    const read = engine.getJob(grant!.meta.jid);
    await flush();
    store.release();
    expect((await read).meta).toMatchObject({ state: "RUNNING", lease: { leaseId: grant!.meta.lease!.leaseId } });
    await submitted;
    await engine.ack(grant!.meta.jid, grant!.meta.lease!.leaseId, new Uint8Array());
    expect((await engine.getJob(grant!.meta.jid)).meta.state).toBe("COMPLETED");
  });
});
