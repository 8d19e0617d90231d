import { it } from "vitest";
import { openEngine, submitOne, lease, flush } from "./helpers.js";
it("dbg", async () => {
  const { clock, engine, data } = await openEngine();
  const jid = await submitOne(engine, { type: "t", reserveForMs: 5000 });
  const { sink } = await lease(engine, ["default"], 1);
  const e = engine as any;
  console.log("holders", [...e.holders.keys()], [...[...e.sessions.values()][0].held]);
  const origRelease = e.release.bind(e);
  e.release = (j: string) => { console.log("release", j, e.holders.has(j)); origRelease(j); };
  const origApply = e.apply.bind(e);
  e.apply = (m: any, ev: any) => { console.log("apply", ev.kind, m.state); return origApply(m, ev); };
  clock.advance(5000);
  engine.tick();
  console.log("after tick", e.live.get(jid)?.state, [...[...e.sessions.values()][0].held]);
  await flush();
});
