import { describe, expect, it } from "vitest";
import { SharedSubmitLimiter } from "../../src/transport/auth/shared-submit-rate.js";
import { SubmitRateLimiter } from "../../src/transport/auth/submit-rate.js";

/** Servers drawing from one bucket (manual clock), each draw counted. */
function sharedBucket(rate: { perSecond: number; burst: number }) {
  const clock = { now: 0 };
  const bucket = new SubmitRateLimiter(rate, () => clock.now);
  const draws: { need: number; most: number; granted: number }[] = [];
  const buckets = {
    draw: async (caller: string, need: number, most: number) => {
      const draw = bucket.draw(caller, need, most);
      draws.push({ need, most, granted: draw.granted });
      return draw;
    },
  };
  return { clock, draws, server: () => new SharedSubmitLimiter(rate, buckets) };
}

const admitted = async (limiter: SharedSubmitLimiter, caller: string, jobs: number) => (await limiter.take(caller, jobs)).allowed;

describe("--submit-rate shared by several servers", () => {
  it("the servers together admit the bucket's burst and no more; the refused one is told when to retry", async () => {
    const { clock, server } = sharedBucket({ perSecond: 100, burst: 100 });
    const servers = [server(), server(), server(), server()];
    let allowed = 0;
    for (let i = 0; i < 200; i++) if (await admitted(servers[i % 4]!, "a", 1)) allowed++;
    expect(allowed).toBe(100);
    const refusal = await servers[0]!.take("a", 1);
    expect(refusal).toMatchObject({ allowed: false });
    expect((refusal as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(0);
    clock.now = 1_000; // a second refills the rate, spread over whichever servers ask
    allowed = 0;
    for (let i = 0; i < 200; i++) if (await admitted(servers[(i * 3) % 4]!, "a", 1)) allowed++;
    expect(allowed).toBeLessThanOrEqual(100);
    expect(allowed).toBeGreaterThanOrEqual(100 - 4 * 5); // what the others hold undrawn is at most their extra
  });

  it("draws a little ahead, so most calls are admitted without asking", async () => {
    const { draws, server } = sharedBucket({ perSecond: 1_000, burst: 1_000 });
    const limiter = server();
    for (let i = 0; i < 500; i++) expect(await admitted(limiter, "a", 1)).toBe(true);
    expect(draws.length).toBe(10); // 50 at a time: a twentieth of a second of the rate
  });

  it("concurrent calls on one server wait for one draw and share what it brought", async () => {
    const { draws, server } = sharedBucket({ perSecond: 1_000, burst: 1_000 });
    const limiter = server();
    const answers = await Promise.all(Array.from({ length: 40 }, () => limiter.take("a", 1)));
    expect(answers.every((answer) => answer.allowed)).toBe(true);
    expect(draws.length).toBe(1);
  });

  it("keeps callers apart and refuses a batch larger than the burst without asking", async () => {
    const { draws, server } = sharedBucket({ perSecond: 1, burst: 2 });
    const limiter = server();
    expect(await admitted(limiter, "a", 2)).toBe(true);
    expect(await admitted(limiter, "a", 1)).toBe(false);
    expect(await admitted(limiter, "b", 2)).toBe(true);
    const before = draws.length;
    expect(await limiter.take("b", 3)).toMatchObject({ allowed: false, retryAfterMs: 0 });
    expect(draws.length).toBe(before);
  });

  it("a bucket out of reach refuses with UNAVAILABLE", async () => {
    const limiter = new SharedSubmitLimiter(
      { perSecond: 10, burst: 10 },
      { draw: async () => Promise.reject(new Error("connection refused")) },
    );
    await expect(Promise.resolve(limiter.take("a", 1))).rejects.toThrow(/cannot count the submit rate now \(connection refused\)/);
  });
});
