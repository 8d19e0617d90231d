import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { summarizeCpuProfile } from "../lib/cpu-profile.mjs";
import { withScope } from "../lib/run-scope.mjs";
import { rate } from "../lib/stats.mjs";
import { markdownTable, num } from "../lib/table.mjs";

export const PROFILE_DIR = fileURLToPath(new URL("../results/profiles/", import.meta.url));

/**
 * One extra W1 end-to-end run (TS library, single submits) with the Worq server under
 * `node --cpu-prof`; the profile goes to bench/results/profiles/ (gitignored) and its top
 * self-time functions into the results. Not one of the figures: profiling slows the server.
 */
export async function profileWorqServer(ctx, name) {
  const { n } = ctx.options;
  mkdirSync(PROFILE_DIR, { recursive: true });
  const file = `${name}.cpuprofile`;
  const e2eRate = await withScope(ctx, async (scope) => {
    const server = await scope.server("worq-lib", "profile", { cpuProfile: { dir: PROFILE_DIR, name: file } });
    const config = { ...server.target, queue: "bench", n, mode: "single", concurrency: 50, expect: n };
    const producer = scope.child("worq-lib", "producer", config);
    const worker = scope.child("worq-lib", "worker", config);
    await Promise.all([producer.next("ready"), worker.next("ready")]);
    worker.send("go");
    producer.send("go");
    const submitted = await producer.next("result");
    const done = await worker.next("done");
    worker.send("stop");
    await worker.next("stopped");
    return rate(n, submitted.startedAt, done.lastAt);
  });
  const path = join(PROFILE_DIR, file);
  if (!existsSync(path)) throw new Error(`no profile written at ${path}`);
  return { path: `bench/results/profiles/${file}`, n, e2eRateUnderProfiler: e2eRate, ...summarizeCpuProfile(path) };
}

export function renderProfile(profile) {
  return [
    `### Worq server CPU profile (W1 end-to-end, TS library, single submits, N = ${profile.n.toLocaleString("en-US")}, under --cpu-prof: ${num(profile.e2eRateUnderProfiler)} jobs/s)`,
    "",
    markdownTable(
      ["Self time, top functions", "ms", "share"],
      profile.top.map((t) => [`\`${t.name}\``, num(t.selfMs), `${(t.share * 100).toFixed(1)}%`]),
    ),
    "",
    markdownTable(
      ["Self time by package / directory", "ms", "share"],
      profile.byPackage.map((t) => [`\`${t.name}\``, num(t.selfMs), `${(t.share * 100).toFixed(1)}%`]),
    ),
    "",
    `Profile: \`${profile.path}\` (open in Chrome DevTools → Performance, or speedscope).`,
  ].join("\n");
}
