// Preloaded into a server by `bench/diag/e2e.mjs --alloc` (node --import): samples every
// allocation from the start, garbage included, and on SIGTERM writes the sampled heap
// profile to $WORQ_ALLOC_PROFILE before the server's own shutdown runs.
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";

const out = process.env.WORQ_ALLOC_PROFILE;
if (!out) throw new Error("alloc-preload: set WORQ_ALLOC_PROFILE to the profile's path");
const session = new Session();
session.connect();
await session.post("HeapProfiler.enable");
await session.post("HeapProfiler.startSampling", {
  samplingInterval: 1024,
  includeObjectsCollectedByMajorGC: true,
  includeObjectsCollectedByMinorGC: true,
});
process.prependOnceListener("SIGTERM", () => {
  session.post("HeapProfiler.stopSampling").then(
    ({ profile }) => {
      writeFileSync(out, JSON.stringify(profile));
      process.exit(0);
    },
    // Said plainly and ended with a failure, rather than as an unhandled rejection racing
    // the server's own shutdown.
    (error) => {
      console.error(`alloc-preload: no heap profile: ${error instanceof Error ? error.message : String(error)}`);
      process.exit(1);
    },
  );
});
