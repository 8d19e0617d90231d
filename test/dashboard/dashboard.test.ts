import { fromJson } from "@bufbuild/protobuf";
import { durationFromMs, ListValueSchema } from "@bufbuild/protobuf/wkt";
import { existsSync, mkdirSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FailureCategory, JobState } from "@worq/client/gen/worq/v1/job_pb.js";
import { ControlAction } from "@worq/client/gen/worq/v1/worker_service_pb.js";
import { packageRoot } from "../../src/package-root.js";
import { StreamWorker } from "../e2e/support/clients.js";
import { startTestServer, type TestServer } from "../e2e/support/test-server.js";
import { chromiumAvailable, eventually, launchBrowser } from "./support/browser.js";

/** Where the tests save a screenshot of each page (README "Dashboard"; CI keeps the folder). */
const SCREENSHOTS = join(packageRoot(), "artifacts/screenshots");
const XSS = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">';

const hasChromium = chromiumAvailable();
let server: TestServer;
let base: string;

beforeAll(async () => {
  if (!existsSync(join(packageRoot(), "dist/dashboard/app.js"))) throw new Error("dist/dashboard is missing: run npm run build first");
  server = await startTestServer();
  base = `http://127.0.0.1:${server.httpPort}`;
});
afterAll(async () => {
  await server?.close();
});

describe("dashboard serving and request safety (real server, no browser)", () => {
  it("serves the page and its files with their content types, a Content-Security-Policy and no inline script", async () => {
    const page = await fetch(`${base}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const csp = page.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain("unsafe-inline");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(page.headers.get("x-content-type-options")).toBe("nosniff");
    const html = await page.text();
    // Every <script> loads a file (CSP forbids inline ones anyway).
    expect([...html.matchAll(/<script\b[^>]*>/g)].every((m) => /\bsrc=/.test(m[0]))).toBe(true);
    for (const [path, type] of [
      ["/app.js", "text/javascript; charset=utf-8"],
      ["/style.css", "text/css; charset=utf-8"],
      ["/favicon.svg", "image/svg+xml"],
    ]) {
      const file = await fetch(`${base}${path}`);
      expect(file.status, path).toBe(200);
      expect(file.headers.get("content-type"), path).toBe(type);
      expect(file.headers.get("content-security-policy"), path).toBe(csp);
    }
  });

  it("refuses a state change sent as a form would send it (no CSRF by plain POST): the queue stays unpaused", async () => {
    for (const type of ["application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x"]) {
      const response = await fetch(`${base}/worq.v1.AdminService/PauseQueue`, {
        method: "POST",
        headers: { "content-type": type },
        body: '{"queue":"csrf-form"}',
      });
      expect(response.status, type).toBe(415);
    }
    expect((await server.admin.getQueueStats({ queue: "csrf-form" })).stats!.paused).toBe(false);
  });
});

describe.skipIf(!hasChromium)("dashboard in Chromium (real server, real browser)", { timeout: 60_000 }, () => {
  let context: BrowserContext;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  let holder: StreamWorker;
  const seeded: Record<string, string> = {};

  /** Jobs that end DEAD_LETTER (one attempt, failed). */
  async function deadJobs(queue: string, count: number): Promise<string[]> {
    const { jobs } = await server.producer.submitBatch({
      jobs: Array.from({ length: count }, () => ({ type: "flaky.report", queue, retry: { maxAttempts: 1 } })),
    });
    const worker = new StreamWorker(server, { queues: [queue], workerId: `w-${queue}`, credits: count });
    for (let i = 0; i < count; i++) {
      const leased = await worker.next();
      await server.worker.fail({
        jid: leased.job!.jid,
        leaseId: leased.leaseId,
        message: `boom <b>${i}</b>`,
        backtrace: ["at a (x.js:1)", "at b (y.js:2)"],
      });
    }
    await worker.stop();
    return jobs.map((j) => j.jid);
  }

  async function show(hash: string, ready: string) {
    await page.goto(`${base}/${hash}`);
    await page.waitForSelector(ready);
  }

  async function screenshot(name: string) {
    await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
  }

  const text = (selector: string) => page.locator(selector).first().textContent({ timeout: 5_000 });

  beforeAll(async () => {
    mkdirSync(SCREENSHOTS, { recursive: true });
    // Seed: ready jobs in two queues, a delayed one, a retrying one, dead ones, a job with
    // hostile args and a large payload, and a worker holding a job.
    const mail = await server.producer.submitBatch({
      jobs: [
        { type: "email.send", queue: "mail", tags: { tenant: "acme" }, correlationId: "req-42" },
        { type: "email.send", queue: "mail", tags: { tenant: "globex" } },
        { type: "sms.send", queue: "mail", tags: { tenant: "acme" } },
      ],
    });
    seeded.smsJid = mail.jobs[2]!.jid;
    seeded.delayed = (
      await server.producer.submit({ job: { type: "report.monthly", queue: "reports", delay: durationFromMs(3_600_000) } })
    ).jid;
    const [dead1, dead2] = await deadJobs("billing", 2);
    seeded.dead1 = dead1!;
    seeded.dead2 = dead2!;
    seeded.retrying = (
      await server.producer.submit({
        job: { type: "webhook.deliver", queue: "hooks", retry: { maxAttempts: 5, initialDelay: durationFromMs(3_600_000) } },
      })
    ).jid;
    const hookWorker = new StreamWorker(server, { queues: ["hooks"], workerId: "w-hooks", credits: 1 });
    const hook = await hookWorker.next();
    await server.worker.fail({ jid: hook.job!.jid, leaseId: hook.leaseId, message: "503 from upstream" });
    await hookWorker.stop();
    seeded.evil = (
      await server.producer.submit({
        job: {
          type: "<img src=x onerror=alert(1)>",
          queue: "evil",
          args: fromJson(ListValueSchema, [XSS, { html: "</pre><script>window.__xss = 3</script>" }]),
          kwargs: { "<b>key</b>": XSS },
          tags: { "<i>tag</i>": XSS },
          payload: new TextEncoder().encode(`${"payload line\n".repeat(1000)}THE END`),
        },
      })
    ).jid;
    await server.producer.submit({ job: { type: "image.resize", queue: "busy" } });
    holder = new StreamWorker(server, { queues: ["busy"], workerId: "w-busy-1", credits: 1 });
    const held = await holder.next();
    seeded.held = held.job!.jid;
    seeded.heldLease = held.leaseId;

    const browser = await launchBrowser();
    context = browser.context;
    closeBrowser = browser.close;
    page = await context.newPage();
    page.on("dialog", (dialog) => void dialog.accept()); // the confirmations of purge, delete, retry all…
  });
  afterAll(async () => {
    await holder?.stop();
    await closeBrowser?.();
  });

  it("Overview shows the API's totals (processed, failed, dead, submitted, live, workers) and server info", async () => {
    await show("", "[data-stat=processed]");
    await eventually(async () => {
      const [info, queues] = await Promise.all([server.admin.getServerInfo({}), server.admin.listQueues({ pageSize: 1000 })]);
      const dead = queues.queues.reduce((sum, q) => sum + q.dead, 0n);
      const expected = {
        processed: info.totalProcessed,
        failed: info.totalFailed,
        dead,
        submitted: info.totalSubmitted,
        live: info.liveJobs,
        workers: info.connectedWorkers,
      };
      for (const [stat, value] of Object.entries(expected)) {
        if ((await text(`[data-stat=${stat}] .value`)) !== value.toLocaleString("en-US")) return false;
      }
      return expected.failed === 3n && dead === 2n; // the seed's failures are all shown
    }, "the overview cards to match the API");
    expect(await page.locator("main").textContent()).toContain("leveldb");
    expect(await page.locator("svg.chart").count()).toBe(2);
    await screenshot("overview");
  });

  it("Queues shows each queue's counts as ListQueues reports them", async () => {
    await show("#/queues", 'tr[data-queue="mail"]');
    const { queues } = await server.admin.listQueues({ pageSize: 1000 });
    for (const q of queues) {
      const row = `tr[data-queue="${q.queue}"]`;
      for (const [col, value] of [
        ["SCHEDULED", q.ready],
        ["DELAYED", q.delayed],
        ["RUNNING", q.inFlight],
        ["RETRYING", q.retrying],
        ["DEAD_LETTER", q.dead],
      ] as const) {
        expect(await text(`${row} td[data-col=${col}]`), `${q.queue} ${col}`).toBe(value.toString());
      }
    }
    expect(await text('tr[data-queue="mail"] td[data-col=SCHEDULED]')).toBe("3");
    await screenshot("queues");
    await page.emulateMedia({ colorScheme: "dark" });
    await screenshot("queues-dark");
    await page.emulateMedia({ colorScheme: "light" });
  });

  it("pausing a queue in the browser stops a worker getting its jobs; resuming delivers them", async () => {
    await server.producer.submit({ job: { type: "thumb", queue: "pausable" } });
    await show("#/queues", 'tr[data-queue="pausable"]');
    await page.click('tr[data-queue="pausable"] button:has-text("Pause")');
    await page.waitForSelector('tr[data-queue="pausable"] .paused');
    expect((await server.admin.getQueueStats({ queue: "pausable" })).stats!.paused).toBe(true);
    const worker = new StreamWorker(server, { queues: ["pausable"], workerId: "w-pausable", credits: 1 });
    try {
      await expect(worker.next(1_500)).rejects.toThrow(/no job leased/);
      await page.click('tr[data-queue="pausable"] button:has-text("Resume")');
      const leased = await worker.next(5_000);
      expect(leased.job!.type).toBe("thumb");
      await server.worker.ack({ jid: leased.job!.jid, leaseId: leased.leaseId });
    } finally {
      await worker.stop();
    }
  });

  it("Purge (confirmed) deletes a queue's waiting jobs; Quiet tells a worker's stream", async () => {
    await server.producer.submitBatch({
      jobs: [
        { type: "old", queue: "purgeable" },
        { type: "old", queue: "purgeable" },
      ],
    });
    await show("#/queues", 'tr[data-queue="purgeable"]');
    await page.click('tr[data-queue="purgeable"] button:has-text("Purge")');
    await eventually(
      async () => (await text('tr[data-queue="purgeable"] td[data-col=SCHEDULED]')) === "0",
      "the purged queue to show 0 ready",
    );
    expect((await server.admin.getQueueStats({ queue: "purgeable" })).stats!.ready).toBe(0n);

    const quiet = new StreamWorker(server, { queues: ["quiet-q"], workerId: "w-quiet", credits: 1 });
    try {
      await show("#/workers", 'tr[data-worker="w-quiet"]');
      await page.click('tr[data-worker="w-quiet"] button:has-text("Quiet")');
      await quiet.waitForMessage((message) => message.kind.case === "control" && message.kind.value.action === ControlAction.QUIET);
    } finally {
      await quiet.stop();
    }
  });

  it("Jobs filters by type and tag, as ListJobs does, and links each job", async () => {
    await show(`#/jobs?queue=mail&state=SCHEDULED&tag=tenant%3Dacme`, "tr[data-jid]");
    const { jobs } = await server.admin.listJobs({ queue: "mail", state: JobState.SCHEDULED, tags: { tenant: "acme" } });
    expect(jobs).toHaveLength(2);
    const shown = await page.locator("tr[data-jid]").evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset.jid));
    expect(shown).toEqual(jobs.map((j) => j.jid));
    await screenshot("jobs");
    // The filter form drives the same query: type sms.send leaves one job.
    await page.fill('input[name="type"]', "sms.send");
    await page.click('button:has-text("Filter")');
    await eventually(
      async () =>
        (await page.locator("tr[data-jid]").count()) === 1 && (await page.locator(`tr[data-jid="${seeded.smsJid}"]`).count()) === 1,
      "one sms job",
    );
  });

  it("Job detail renders hostile args, kwargs, tags and type as text (no script runs) and truncates a large payload", async () => {
    await show(`#/job/${seeded.evil}`, '[data-block="args"]');
    const args = await text('[data-block="args"]');
    expect(args).toContain("<script>window.__xss = 1</script>");
    expect(args).toContain("</pre><script>window.__xss = 3</script>");
    expect(await text('[data-block="kwargs"]')).toContain("<b>key</b>");
    expect(await page.locator("main").textContent()).toContain("<img src=x onerror=alert(1)>");
    expect(await page.locator("main").textContent()).toContain("<i>tag</i>");
    // Only the dashboard's own script element exists, and none of the job's ran.
    expect(await page.evaluate(() => document.querySelectorAll("script").length)).toBe(1);
    expect(await page.evaluate(() => document.querySelectorAll("main img, main b, main i").length)).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __xss?: number }).__xss)).toBeUndefined();
    // The payload (13 KB) shows its first 4 KiB until asked for all of it.
    expect(await text('[data-block="payload"]')).not.toContain("THE END");
    await screenshot("job-detail");
    await page.click('button:has-text("Show all")');
    await eventually(async () => (await text('[data-block="payload"]'))?.endsWith("THE END"), "the whole payload");
    await page.click('button:has-text("As hex")');
    expect(await text('[data-block="payload"]')).toMatch(/^00000000 {2}70 61 79 6c/); // "payl"
  });

  it("Job detail shows a running job's progress as its handler reports it, and its checkpoint's size", async () => {
    await server.worker.reportProgress({ jid: seeded.held!, leaseId: seeded.heldLease!, percent: 40, message: "resizing <b>4</b> of 10" });
    await server.worker.checkpoint({ jid: seeded.held!, leaseId: seeded.heldLease!, data: new Uint8Array(2048) });
    await show(`#/job/${seeded.held}`, '[data-block="progress"]');
    expect(await text('[data-block="progress"]')).toContain("40% resizing <b>4</b> of 10");
    expect(await page.evaluate(() => (document.querySelector('[data-block="progress"] progress') as HTMLProgressElement).value)).toBe(40);
    expect(await page.locator("main").textContent()).toContain("2.0 KiB saved");
    // The page refreshes on its own: a later report shows without a reload.
    await server.worker.reportProgress({ jid: seeded.held!, leaseId: seeded.heldLease!, percent: 75, message: "nearly" });
    await eventually(async () => (await text('[data-block="progress"]'))?.includes("75% nearly") ?? false, "the later report");
    await screenshot("job-progress");
  });

  it("Job detail shows a failure's code and cause; Queues shows which failures a queue retries", async () => {
    const { jid } = await server.producer.submit({ job: { type: "charge", queue: "failing-codes" } });
    const worker = new StreamWorker(server, { queues: ["failing-codes"], workerId: "w-codes", credits: 1 });
    try {
      const leased = await worker.next(5_000);
      await server.worker.fail({
        jid,
        leaseId: leased.leaseId,
        message: "card declined",
        category: FailureCategory.PERMANENT,
        code: "card_declined",
        cause: "gateway said <b>402</b>",
      });
    } finally {
      await worker.stop();
    }
    await show(`#/job/${jid}`, '[data-block="cause"]');
    expect(await text('[data-block="cause"]')).toContain("gateway said <b>402</b>");
    expect(await page.locator("main").textContent()).toContain("card_declined");
    await server.admin.configureQueue({
      queue: "failing-codes",
      config: { retrySystem: false, maxRunning: 5, rateLimit: { starts: 10, period: durationFromMs(1_000), burst: 10 } },
    });
    await show("#/queues", 'tr[data-queue="failing-codes"]');
    expect(await text('tr[data-queue="failing-codes"] td[data-col=retry]')).toBe("timeouts");
    expect(await text('tr[data-queue="failing-codes"] td[data-col=limits]')).toMatch(/^0 \/ 5 running · 10 per 1 s \(\d+ now\)$/);
    expect(await text('tr[data-queue="mail"] td[data-col=limits]')).toBe("none");
  });

  it("Queues shows a queue's group limits and its groups with their ready and running jobs", async () => {
    await server.admin.configureQueue({
      queue: "tenants",
      config: {
        groupLimits: {
          limits: [{ pattern: "customer:*", maxRunning: 2, rateLimit: { starts: 10, period: durationFromMs(60_000), burst: 10 } }],
        },
      },
    });
    await server.producer.submitBatch({
      jobs: [
        ...Array.from({ length: 3 }, () => ({ type: "t", queue: "tenants", groupKey: "customer:<b>7</b>" })),
        { type: "t", queue: "tenants", groupKey: "bulk" },
      ],
    });
    await show("#/queues", 'tr[data-queue="tenants"]');
    expect(await text('tr[data-queue="tenants"] td[data-col=limits]')).toBe("each customer:*: 2 running, 10 per 1 min 0 s");
    expect(await text('tr[data-queue="tenants"] td[data-col=groups]')).toBe(
      "2 · customer:<b>7</b> 3 ready, 0 running, 0 tokens · bulk 1 ready, 0 running",
    );
    expect(await text('tr[data-queue="mail"] td[data-col=groups]')).toBe("–");
    await screenshot("queues-groups");
  });

  it("Dead lists the dead jobs; Retry on one moves it out of Dead (SCHEDULED in the API)", async () => {
    await show("#/dead", `tr[data-jid="${seeded.dead1}"]`);
    expect(await page.locator("tr[data-jid]").count()).toBe(2);
    expect(await text(`tr[data-jid="${seeded.dead1}"]`)).toContain("boom <b>");
    await screenshot("dead");
    await page.click(`tr[data-jid="${seeded.dead1}"] button[data-action="retry"]`);
    await page.waitForSelector(`tr[data-jid="${seeded.dead1}"]`, { state: "detached" });
    expect((await server.admin.getJob({ jid: seeded.dead1! })).job!.state).toBe(JobState.SCHEDULED);
    expect(await page.locator("tr[data-jid]").count()).toBe(1);
  });

  it("Scheduled and Retries list their jobs; bulk Run now makes them ready", async () => {
    await show("#/retries", `tr[data-jid="${seeded.retrying}"]`);
    expect(await text(`tr[data-jid="${seeded.retrying}"]`)).toContain("503 from upstream");
    await screenshot("retries");
    await show("#/scheduled", `tr[data-jid="${seeded.delayed}"]`);
    await screenshot("scheduled");
    await page.check(`tr[data-jid="${seeded.delayed}"] input[type=checkbox]`);
    await page.click('button[data-bulk="Run now"]');
    await page.waitForSelector(`tr[data-jid="${seeded.delayed}"]`, { state: "detached" });
    expect((await server.admin.getJob({ jid: seeded.delayed! })).job!.state).toBe(JobState.SCHEDULED);
  });

  it("Workers shows each connected worker and the jobs it holds", async () => {
    await show("#/workers", 'tr[data-worker="w-busy-1"]');
    const row = 'tr[data-worker="w-busy-1"]';
    expect(await text(`${row} td[data-col=held]`)).toBe("1");
    expect(await text(row)).toContain(seeded.held!.slice(0, 8));
    expect(await text(row)).toContain("image.resize");
    await screenshot("workers");
  });

  it("is readable on a phone (390 px): no page-wide horizontal scroll", async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    for (const hash of ["", "#/queues", `#/job/${seeded.evil}`]) {
      await phone.goto(`${base}/${hash}`);
      await phone.waitForSelector("main > *");
      await phone.waitForTimeout(300);
      expect(await phone.evaluate(() => document.documentElement.scrollWidth), hash).toBeLessThanOrEqual(390);
    }
    await phone.goto(`${base}/`);
    await phone.waitForSelector("[data-stat=processed]");
    await phone.screenshot({ path: join(SCREENSHOTS, "overview-phone.png"), fullPage: true });
    await phone.close();
  });

  it("a page on another origin cannot call the API (no CORS): the state change never happens", async () => {
    const other: Server = createServer((_, response) =>
      response.writeHead(200, { "content-type": "text/html" }).end("<title>elsewhere</title>"),
    );
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    try {
      const evil = await context.newPage();
      await evil.goto(`http://localhost:${(other.address() as AddressInfo).port}/`);
      const outcome = await evil.evaluate(async (url) => {
        try {
          await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: '{"queue":"csrf-browser"}' });
          return "sent";
        } catch {
          return "blocked";
        }
      }, `${base}/worq.v1.AdminService/PauseQueue`);
      expect(outcome).toBe("blocked");
      await evil.close();
      expect((await server.admin.getQueueStats({ queue: "csrf-browser" })).stats!.paused).toBe(false);
    } finally {
      other.close();
    }
  });
});

describe.skipIf(!hasChromium)("dashboard token handling in Chromium", { timeout: 60_000 }, () => {
  let browser: Awaited<ReturnType<typeof launchBrowser>>;
  beforeAll(async () => {
    browser = await launchBrowser();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it("sends a stored token as an Authorization header on every API call, and forgets it on request", async () => {
    const page = await browser.context.newPage();
    const authorizations: (string | undefined)[] = [];
    page.on("request", (request) => {
      if (request.url().includes("/worq.v1.")) authorizations.push(request.headers()["authorization"]);
    });
    await page.goto(`${base}/#/queues`);
    await page.evaluate(() => sessionStorage.setItem("worq.token", "t0ken-from-the-user"));
    await page.reload();
    await page.waitForSelector("table");
    authorizations.length = 0;
    await page.waitForSelector('button:has-text("Forget token")');
    await eventually(async () => authorizations.length >= 2, "two API calls");
    expect(new Set(authorizations)).toEqual(new Set(["Bearer t0ken-from-the-user"]));
    await page.click('button:has-text("Forget token")');
    expect(await page.evaluate(() => sessionStorage.getItem("worq.token"))).toBeNull();
    authorizations.length = 0;
    await eventually(async () => authorizations.length >= 1, "an API call");
    expect(authorizations.every((value) => value === undefined)).toBe(true);
    await page.close();
  });

  // This branch's server has no auth yet: the server's UNAUTHENTICATED answer is played by the
  // browser's request routing, to check what the page does with it.
  it("asks for a token when the server answers UNAUTHENTICATED, then uses it", async () => {
    const page = await browser.context.newPage();
    await page.route("**/worq.v1.*/**", async (route) => {
      if (route.request().headers()["authorization"] === "Bearer right") return route.continue();
      return route.fulfill({
        status: 401,
        contentType: "application/json",
        body: '{"code":"unauthenticated","message":"a bearer token is required"}',
      });
    });
    await page.goto(`${base}/#/queues`);
    await page.waitForSelector('input[name="token"]');
    expect(await page.locator("main").textContent()).toContain("Token required");
    await page.fill('input[name="token"]', "right");
    await page.click('button:has-text("Use token")');
    await page.waitForSelector('tr[data-queue="mail"]');
    expect(await page.evaluate(() => sessionStorage.getItem("worq.token"))).toBe("right");
    await page.close();
  });
});
