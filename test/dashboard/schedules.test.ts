/**
 * The dashboard's Schedules page in Chromium against a real server: each schedule with its
 * next runs and last outcome as the API reports them, and its Pause, Resume and Run now
 * buttons changing the schedule on the server.
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { timestampMs } from "@bufbuild/protobuf/wkt";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Overlap } from "@worq/client/gen/worq/v1/schedule_pb.js";
import { packageRoot } from "../../src/package-root.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { chromiumAvailable, eventually, launchBrowser } from "./support/browser.js";

const SCREENSHOTS = join(packageRoot(), "artifacts/screenshots");
const XSS = '<img src=x onerror="window.__xss = 1">';

describe.skipIf(!chromiumAvailable())("dashboard: Schedules page in Chromium (real server, real browser)", { timeout: 60_000 }, () => {
  let server: TestServer;
  let page: Page;
  let closeBrowser: () => Promise<void>;
  const base = () => `http://127.0.0.1:${server.httpPort}`;
  const text = (selector: string) => page.locator(selector).first().textContent({ timeout: 5_000 });

  beforeAll(async () => {
    if (!existsSync(join(packageRoot(), "dist/dashboard/app.js"))) throw new Error("dist/dashboard is missing: run npm run build first");
    server = await startTestServer();
    await server.admin.putSchedule({
      schedule: {
        name: "nightly",
        cron: "30 2 * * *",
        timeZone: "Europe/Berlin",
        job: { type: "report", queue: "reports" },
        overlap: Overlap.SKIP,
        description: XSS,
      },
    });
    await server.admin.putSchedule({ schedule: { name: "hourly", cron: "@hourly", job: { type: XSS } } });
    const browser = await launchBrowser();
    closeBrowser = browser.close;
    page = await browser.context.newPage();
  });
  afterAll(async () => {
    await closeBrowser?.();
    await server?.close();
  });

  it("lists each schedule with its next runs and last outcome; Run now, Pause and Resume act on the server", async () => {
    await page.goto(`${base()}/#/schedules`);
    await page.waitForSelector('tr[data-schedule="nightly"]');
    expect(await page.locator("nav").textContent()).toContain("Schedules");
    const row = 'tr[data-schedule="nightly"]';
    const { schedule } = await server.admin.getSchedule({ name: "nightly" });
    const firstRun = new Date(timestampMs(schedule!.nextRuns[0]!)).toLocaleString("sv-SE");
    expect(await text(`${row} td[data-col=next]`)).toContain(firstRun);
    expect(await text(`${row} td[data-col=outcome]`)).toBe("–");
    expect(await text(`${row} td[data-col=zone]`)).toBe("Europe/Berlin");
    expect(await text('tr[data-schedule="hourly"] td[data-col=job]')).toContain(XSS); // shown as text

    await page.locator(`${row} button`, { hasText: "Run now" }).click();
    await eventually(
      async () => (await server.admin.getSchedule({ name: "nightly" })).schedule!.lastJid !== "",
      "run now to enqueue a job",
    );
    const { schedule: ran } = await server.admin.getSchedule({ name: "nightly" });
    await eventually(
      async () => (await text(`${row} td[data-col=outcome]`))?.includes(ran!.lastJid.slice(0, 8)) ?? false,
      "the last outcome",
    );
    expect(await text(`${row} td[data-col=outcome]`)).toContain("SCHEDULED");

    await page.locator(`${row} button`, { hasText: "Pause" }).click();
    await eventually(async () => (await server.admin.getSchedule({ name: "nightly" })).schedule!.paused, "pause to reach the server");
    await eventually(async () => (await text(`${row} td[data-col=status]`)) === "paused", "the row to show paused");
    await page.locator(`${row} button`, { hasText: "Resume" }).click();
    await eventually(async () => !(await server.admin.getSchedule({ name: "nightly" })).schedule!.paused, "resume to reach the server");
    // Run now again: the overlap policy (SKIP) skips it while the first job waits.
    await page.locator(`${row} button`, { hasText: "Run now" }).click();
    await eventually(async () => (await server.admin.getSchedule({ name: "nightly" })).schedule!.skippedTicks === 1n, "the skip");
    await eventually(async () => (await text(`${row} td[data-col=skipped]`)) === "1", "the skipped count");
    expect(await page.evaluate(() => (globalThis as { __xss?: number }).__xss)).toBeUndefined();
    expect(await page.locator("main img").count()).toBe(0);
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, "schedules.png"), fullPage: true });
  });
});
