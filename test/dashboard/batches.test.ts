/**
 * The dashboard's Batches page in Chromium on a real server: each batch's state, counts and
 * callbacks as ListBatches reports them, the callback job linked once enqueued.
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FailureCategory } from "@worq/client/gen/worq/v1/job_pb.js";
import { packageRoot } from "../../src/package-root.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { chromiumAvailable, launchBrowser } from "./support/browser.js";

const SCREENSHOTS = join(packageRoot(), "artifacts/screenshots");
const XSS = '<img src=x onerror="window.__xss = 1">';

describe.skipIf(!chromiumAvailable())("dashboard Batches page in Chromium (real server, real browser)", { timeout: 60_000 }, () => {
  let server: TestServer;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  beforeAll(async () => {
    if (!existsSync(join(packageRoot(), "dist/dashboard/app.js"))) throw new Error("dist/dashboard is missing: run npm run build first");
    server = await startTestServer();
    const browser = await launchBrowser();
    closeBrowser = () => browser.close();
    page = await browser.context.newPage();
  });
  afterAll(async () => {
    await closeBrowser?.();
    await server?.close();
  });

  it("shows each batch's state, counts and callbacks; the on-complete job linked once it ran", async () => {
    const { batch: done } = await server.producer.createBatch({
      batch: {
        description: `nightly ${XSS}`,
        onSuccess: { job: { type: "notify.ok", queue: "cb" } },
        onComplete: { job: { type: "report.done", queue: "cb" } },
      },
    });
    const { batch: open } = await server.producer.createBatch({ batch: { description: "still open" } });
    await server.producer.submitBatch({
      jobs: [
        { type: "t", queue: "dash-batch", batchId: done!.id },
        { type: "t", queue: "dash-batch", batchId: done!.id },
        { type: "t", queue: "dash-open", batchId: open!.id },
      ],
    });
    await server.producer.sealBatch({ id: done!.id });
    const worker = new StreamWorker(server, { queues: ["dash-batch"], workerId: "dash", credits: 2 });
    const first = await worker.next();
    await server.worker.ack({ jid: first.job!.jid, leaseId: first.leaseId });
    const second = await worker.next();
    await server.worker.fail({ jid: second.job!.jid, leaseId: second.leaseId, message: "no", category: FailureCategory.PERMANENT });
    await worker.stop();
    const { batch: finished } = await server.producer.getBatch({ id: done!.id, wait: { seconds: 10n, nanos: 0 } });

    await page.goto(`http://127.0.0.1:${server.httpPort}/#/batches`);
    const row = `tr[data-batch="${done!.id}"]`;
    await page.waitForSelector(row);
    const cell = (col: string, of = row) => page.locator(`${of} td[data-col="${col}"]`).first().textContent();
    expect(await cell("state")).toBe("finished with failures");
    expect([await cell("total"), await cell("pending"), await cell("completed"), await cell("failed")]).toEqual(["2", "0", "1", "1"]);
    expect(await cell("on-success")).toBe("notify.ok @ cb (not run)");
    expect(await cell("on-complete")).toContain("report.done @ cb →");
    expect(await page.locator(`${row} td[data-col="on-complete"] a`).getAttribute("href")).toBe(`#/job/${finished!.onCompleteJid}`);
    const openRow = `tr[data-batch="${open!.id}"]`;
    expect(await cell("state", openRow)).toBe("open");
    expect(await cell("pending", openRow)).toBe("1");
    // Newest first; the description is text, never markup.
    expect(await page.locator("tr[data-batch]").first().getAttribute("data-batch")).toBe(open!.id);
    expect(await page.locator(row).textContent()).toContain(XSS);
    expect(await page.evaluate(() => (globalThis as unknown as { __xss?: number }).__xss)).toBeUndefined();
    expect(await page.locator('nav a:has-text("Batches")').count()).toBe(1);
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, "batches.png"), fullPage: true });
  });
});
