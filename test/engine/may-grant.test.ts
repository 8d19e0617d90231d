import { describe, expect, it } from "vitest";
import { batch, flush, lease, openEngine } from "./helpers.js";

const jobs = (n: number) => Array.from({ length: n }, (_, i) => ({ type: "t", queue: "q", args: [i] }));

describe("mayGrant: an engine that may not hand out leases (a cluster leader whose lead ran out)", () => {
  it("grants nothing while it says no, whatever is ready and whoever has credit; submits still wait their turn", async () => {
    let allowed = true;
    const { engine } = await openEngine({ mayGrant: () => allowed });
    const { sink } = await lease(engine, ["q"], 10);
    await engine.submit(jobs(2), batch);
    await flush();
    expect(sink.grants).toHaveLength(2);

    allowed = false;
    await engine.submit(jobs(3), batch);
    await flush();
    expect(sink.grants).toHaveLength(2);
    const other = await lease(engine, ["q"], 10, "worker-2");
    expect(other.sink.grants).toHaveLength(0);
    expect(engine.queueStats("q")).toMatchObject({ inFlight: 2, ready: 3 });

    // The next pump after it says yes again hands them out (an engine that stays deposed is closed instead).
    allowed = true;
    await engine.submit(jobs(1), batch);
    await flush();
    expect(sink.grants.length + other.sink.grants.length).toBe(6);
  });
});
