import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../src/log.js";
import { logLifecycle } from "../src/lifecycle-log.js";
import { flush, lease, openEngine, submitOne } from "./engine/helpers.js";

function capture() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, stream };
}

describe("structured logs", () => {
  it("at debug, one line per lifecycle event, with ids and states but never the job's data", async () => {
    const { lines, stream } = capture();
    const log = createLogger("debug", stream);
    const { engine } = await openEngine({ observeWrites: (writes) => logLifecycle(log, writes) });
    const jid = await submitOne(engine, {
      type: "charge",
      args: ["4111-1111-1111-1111"],
      payload: new TextEncoder().encode("secret-payload"),
    });
    const { sink } = await lease(engine, ["default"], 1);
    await engine.ack(jid, sink.grantOf(jid).meta.lease!.leaseId, new TextEncoder().encode("secret-result"));
    await flush();
    const events = lines.map((line) => [line.msg, line.from, line.to]);
    expect(events).toEqual([
      ["job submitted", undefined, undefined],
      ["job state changed", "SCHEDULED", "RUNNING"],
      ["job state changed", "RUNNING", "COMPLETED"],
    ]);
    expect(lines.every((line) => line.jid === jid && line.level === 20)).toBe(true);
    const text = JSON.stringify(lines);
    for (const secret of ["4111-1111", "secret-payload", "secret-result"]) expect(text).not.toContain(secret);
  });

  it("at info, lifecycle events are not written", async () => {
    const { lines, stream } = capture();
    const log = createLogger("info", stream);
    const { engine } = await openEngine({ observeWrites: (writes) => logLifecycle(log, writes) });
    await submitOne(engine, { type: "t" });
    await flush();
    expect(lines).toEqual([]);
  });
});
