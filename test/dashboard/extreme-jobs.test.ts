import { fromJson } from "@bufbuild/protobuf";
import { durationFromMs, ListValueSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { existsSync } from "node:fs";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { LIMITS } from "../../src/model/limits.js";
import { packageRoot } from "../../src/package-root.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { chromiumAvailable, launchBrowser } from "./support/browser.js";

/**
 * Every dashboard page, in Chromium, with the most extreme jobs the server accepts present:
 * run times at the end of the time range, args at the depth limit, odd numbers and keys, a
 * retry a year away, a dead job with a hostile failure message, a running one. Each page
 * must render without its error banner (which shows when a call the page makes fails).
 */
const DAY_MS = 86_400_000;

/** The latest run time a job with the default ttl may have: its lifetime, starting then, ends at the last time there is. */
const LAST_AT = LIMITS.maxTimeMs - LIMITS.defaultTtlMs;

describe.skipIf(!chromiumAvailable())(
  "dashboard pages with the extreme accepted jobs present (real server, Chromium)",
  { timeout: 60_000 },
  () => {
    let server: TestServer;
    let base: string;
    let context: BrowserContext;
    let closeBrowser: () => Promise<void>;
    let page: Page;
    let holder: StreamWorker;
    const jids: Record<string, string> = {};

    beforeAll(async () => {
      if (!existsSync(join(packageRoot(), "dist/dashboard/app.js"))) throw new Error("dist/dashboard is missing: run npm run build first");
      server = await startTestServer();
      base = `http://127.0.0.1:${server.httpPort}`;
      let deep: unknown = "bottom";
      for (let i = 0; i < LIMITS.maxJsonDepth - 1; i++) deep = [deep];
      const odd = {
        ["__proto__"]: { polluted: true },
        constructor: "c",
        negZero: -0,
        big: 1e308,
        unsafe: 2 ** 53 + 2,
        tiny: 5e-324,
        separators: "\u2028\u2029",
        emoji: "😀",
      };
      const submit = async (job: Parameters<TestServer["producer"]["submit"]>[0]["job"]) => (await server.producer.submit({ job })).jid;
      jids.farAt = await submit({
        type: "far.at",
        queue: "extreme",
        at: timestampFromMs(LAST_AT),
        args: fromJson(ListValueSchema, [deep as never]),
        kwargs: odd,
      });
      jids.farDelay = await submit({ type: "far.delay", queue: "extreme", delay: durationFromMs(LAST_AT - Date.now() - DAY_MS) });
      jids.big = await submit({ type: "big", queue: "extreme", kwargs: { pad: "p".repeat(512 * 1024) }, at: timestampFromMs(LAST_AT - 1) });
      jids.retrying = await submit({
        type: "year.retry",
        queue: "extreme-retry",
        retry: {
          maxAttempts: LIMITS.maxMaxAttempts,
          initialDelay: durationFromMs(LIMITS.maxRetryDelayMs),
          maxDelay: durationFromMs(LIMITS.maxRetryDelayMs),
        },
      });
      jids.dead = await submit({ type: "dead.odd", queue: "extreme-dead", retry: { maxAttempts: 1 } });
      for (const [queue, retryAfter] of [
        ["extreme-retry", durationFromMs(LIMITS.maxRetryDelayMs)],
        ["extreme-dead", undefined],
      ] as const) {
        const worker = new StreamWorker(server, { queues: [queue], workerId: `w-${queue}`, credits: 1 });
        const leased = await worker.next();
        await server.worker.fail({
          jid: leased.job!.jid,
          leaseId: leased.leaseId,
          message: "😀\u2028<b>boom</b>\u0000",
          errtype: "\u2029",
          backtrace: ["x".repeat(10_000)],
          retryAfter,
        });
        await worker.stop();
      }
      expect((await server.admin.getJob({ jid: jids.retrying })).job!.state).toBe(JobState.RETRYING);
      expect((await server.admin.getJob({ jid: jids.dead })).job!.state).toBe(JobState.DEAD_LETTER);
      jids.running = await submit({ type: "running.odd", queue: "extreme-busy", args: fromJson(ListValueSchema, [deep as never]) });
      holder = new StreamWorker(server, { queues: ["extreme-busy"], workerId: "w-extreme", credits: 1 });
      await holder.next();

      const browser = await launchBrowser();
      context = browser.context;
      closeBrowser = browser.close;
      page = await context.newPage();
    });
    afterAll(async () => {
      await holder?.stop();
      await closeBrowser?.();
      await server?.close();
    });

    /** Opens `hash` and waits for `ready` or the error banner; answers the banner's text ("" when hidden). */
    async function bannerOn(hash: string, ready: string): Promise<string> {
      await page.goto(`${base}/${hash}`);
      await page.waitForSelector(`${ready}, #banner:not([hidden])`, { timeout: 10_000 });
      const banner = page.locator("#banner");
      return (await banner.isHidden()) ? "" : ((await banner.textContent()) ?? "?");
    }

    it("Overview, Queues, Jobs, Scheduled, Retries, Dead, Workers and each extreme job's page render without an error", async () => {
      const pages: [string, string][] = [
        ["", "[data-stat=processed]"],
        ["#/queues", 'tr[data-queue="extreme"]'],
        ["#/jobs", "tr[data-jid]"],
        ["#/jobs?queue=extreme", `tr[data-jid="${jids.farAt}"]`],
        ["#/scheduled", `tr[data-jid="${jids.farAt}"]`],
        ["#/retries", `tr[data-jid="${jids.retrying}"]`],
        ["#/dead", `tr[data-jid="${jids.dead}"]`],
        ["#/workers", 'tr[data-worker="w-extreme"]'],
        ...Object.values(jids).map((jid): [string, string] => [`#/job/${jid}`, '[data-block="args"]']),
      ];
      const banners: Record<string, string> = {};
      for (const [hash, ready] of pages) banners[hash || "#/"] = await bannerOn(hash, ready);
      expect(banners).toEqual(Object.fromEntries(pages.map(([hash]) => [hash || "#/", ""])));
      // The Scheduled page lists the far job with its run time: a week before the last ms of year 9999.
      await bannerOn("#/scheduled", `tr[data-jid="${jids.farAt}"]`);
      expect(await page.locator(`tr[data-jid="${jids.farAt}"]`).textContent()).toContain(
        `in ${Math.floor((LAST_AT - Date.now()) / DAY_MS)} d`,
      );
    });
  },
);
