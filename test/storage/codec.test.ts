import { describe, expect, it } from "vitest";
import { buildNewJob } from "../../src/engine/submit-validation.js";
import { decodeMeta, encodeMeta } from "../../src/storage/level/codec.js";

const metaWith = (retry?: Parameters<typeof buildNewJob>[0]["retry"]) =>
  buildNewJob({ type: "t", queue: "q", ...(retry ? { retry } : {}) }, "job", { jid: crypto.randomUUID(), nowMs: 1_700_000_000_000 }, 1 << 20).meta;

describe("LevelDB meta records", () => {
  it("leave out a retry policy equal to layout 1's defaults, and read it back whole", () => {
    const meta = metaWith();
    const bytes = encodeMeta(meta);
    expect(Buffer.from(bytes).toString()).not.toContain('"retry"');
    expect(decodeMeta(bytes)).toEqual(JSON.parse(JSON.stringify(meta)));
  });

  it("keep any other policy as given", () => {
    const meta = metaWith({ maxAttempts: 9, jitter: true });
    const decoded = decodeMeta(encodeMeta(meta));
    expect(decoded.retry).toEqual({ ...meta.retry });
    expect(decoded.retry.maxAttempts).toBe(9);
  });

  it("read records written with the policy in full (older data dirs)", () => {
    const meta = metaWith();
    expect(decodeMeta(Buffer.from(JSON.stringify(meta))).retry).toEqual({ ...meta.retry });
  });
});
