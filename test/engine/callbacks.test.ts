import { describe, expect, it } from "vitest";
import type { PendingCallback } from "../../src/engine/store.js";
import { expectWorqError, flush, lease, openEngine, submitOne } from "./helpers.js";

const allowHooks = (url: URL) => url.origin === "https://hooks.example.com";

describe("004 callback_url: webhooks owed are durable", () => {
  it("a job reaching a terminal state owes its webhook, recorded in the same commit, kept across a restart until settled", async () => {
    const { engine, data, clock } = await openEngine({ isCallbackAllowed: allowHooks });
    const heard: PendingCallback[] = [];
    engine.onCallbackDue((callback) => heard.push(callback));
    const jid = await submitOne(engine, { type: "t", callbackUrl: "https://hooks.example.com/done" });
    const { sink } = await lease(engine, ["default"], 1);
    await engine.ack(jid, sink.grantOf(jid).meta.lease!.leaseId, new Uint8Array());
    await flush();
    expect(heard).toEqual([{ jid, url: "https://hooks.example.com/done" }]);
    expect([...data.callbacks.keys()]).toEqual([jid]);

    await engine.close();
    const restarted = await openEngine({ data, clock, isCallbackAllowed: allowHooks });
    const replayed: PendingCallback[] = [];
    restarted.engine.onCallbackDue((callback) => replayed.push(callback));
    expect(replayed).toEqual([{ jid, url: "https://hooks.example.com/done" }]);
    await restarted.engine.settleCallback(jid);
    expect(data.callbacks.size).toBe(0);
  });

  it("refuses a target outside the allowlist with PERMISSION_DENIED, and anything not http(s)", async () => {
    const { engine, data } = await openEngine({ isCallbackAllowed: allowHooks });
    await expectWorqError(
      () => submitOne(engine, { type: "t", callbackUrl: "http://10.0.0.1/admin" }),
      "WORQ_PERMISSION_DENIED",
      "job.callback_url",
    );
    await expectWorqError(() => submitOne(engine, { type: "t", callbackUrl: "gopher://x" }), "WORQ_INVALID_ARGUMENT", "job.callback_url");
    expect(data.metas.size).toBe(0);
  });

  it("refuses an allowed URL holding a control character as given (NUL, a newline) by name: it is kept as text, which PostgreSQL cannot hold NUL in", async () => {
    const { engine, data } = await openEngine({ isCallbackAllowed: allowHooks });
    for (const callbackUrl of ["https://hooks.example.com/a\u0000b", "https://hooks.example.com/a\nb"]) {
      const error = await expectWorqError(() => submitOne(engine, { type: "t", callbackUrl }), "WORQ_INVALID_ARGUMENT", "job.callback_url");
      expect(error.message).toBe("job.callback_url: must not hold control characters (escape them, e.g. %00)");
    }
    expect(data.metas.size).toBe(0);
    // Escaped, it is stored and read back as given.
    const jid = await submitOne(engine, { type: "t", callbackUrl: "https://hooks.example.com/a%00b" });
    expect((await engine.getJob(jid)).meta.callbackUrl).toBe("https://hooks.example.com/a%00b");
  });

  it("refuses a URL carrying credentials (user:password@ or user@) with INVALID_ARGUMENT naming the field, on single and batch submits", async () => {
    const { engine, data } = await openEngine({ isCallbackAllowed: allowHooks });
    const error = await expectWorqError(
      () => submitOne(engine, { type: "t", callbackUrl: "https://alice:s3cret@hooks.example.com/done" }),
      "WORQ_INVALID_ARGUMENT",
      "job.callback_url",
    );
    expect(error.message).toBe(
      "job.callback_url: must not carry credentials (user:password@); the receiver verifies the Worq-Signature header instead",
    );
    expect(error.message).not.toContain("s3cret");
    await expectWorqError(
      () => submitOne(engine, { type: "t", callbackUrl: "https://alice@hooks.example.com/done" }),
      "WORQ_INVALID_ARGUMENT",
      "job.callback_url",
    );
    await expectWorqError(
      () => engine.submit([{ type: "t" }, { type: "t", callbackUrl: "https://a:b@hooks.example.com/" }], (i) => `jobs[${i}]`),
      "WORQ_INVALID_ARGUMENT",
      "jobs[1].callback_url",
    );
    expect(data.metas.size).toBe(0);
    expect(data.callbacks.size).toBe(0);
  });

  it("with no allowlist (the default) every callback_url is refused", async () => {
    const { engine } = await openEngine();
    await expectWorqError(() => submitOne(engine, { type: "t", callbackUrl: "https://hooks.example.com/x" }), "WORQ_PERMISSION_DENIED");
  });
});
