import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { parseQueueScope } from "../../src/transport/auth/queue-scope.js";
import { tokenFileLine } from "../../src/transport/auth/token-file.js";
import { startSecureServer, TOKENS, writeTokenFile, type SecureServer } from "../security/support/secure-server.js";
import { chromiumAvailable, launchBrowser } from "./support/browser.js";

const hasChromium = chromiumAvailable();
const BILLING_ADMIN = "billing-admin-token";

/** The dashboard in a real browser with an admin token limited to billing.*: it shows nothing of other queues. */
describe("the dashboard with a token scoped to queues", { timeout: 60_000 }, () => {
  let server: SecureServer;
  const tokenDir = mkdtempSync(join(tmpdir(), "worq-scoped-dashboard-"));
  const jids: Record<"billing" | "billingDelayed" | "payroll", string> = { billing: "", billingDelayed: "", payroll: "" };
  beforeAll(async () => {
    const line = tokenFileLine("admin", "billing-ops", BILLING_ADMIN, parseQueueScope("billing.*"));
    server = await startSecureServer({ authTokensFile: writeTokenFile(tokenDir, [line]) });
    const transport = createGrpcTransport({
      baseUrl: `http://127.0.0.1:${server.port}`,
      interceptors: [(next) => (request) => (request.header.set("authorization", `Bearer ${TOKENS.producer}`), next(request))],
    });
    const producer = createClient(ProducerService, transport);
    jids.billing = (await producer.submit({ job: { type: "invoice.send", queue: "billing.eu" } })).jid;
    jids.billingDelayed = (await producer.submit({ job: { type: "invoice.remind", queue: "billing.us", delay: { seconds: 3600n } } })).jid;
    jids.payroll = (await producer.submit({ job: { type: "salary.pay", queue: "payroll" } })).jid;
  });
  afterAll(async () => {
    await server?.close();
    rmSync(tokenDir, { recursive: true, force: true });
  });

  it.skipIf(!hasChromium)("Queues, Jobs, a job's page and Overview show only the token's queues", async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.context.newPage();
      await page.goto(`http://127.0.0.1:${server.httpPort}/#/queues`);
      await page.waitForSelector('input[name="token"]');
      await page.fill('input[name="token"]', BILLING_ADMIN);
      await page.click('button:has-text("Use token")');
      await page.waitForSelector('tr[data-queue="billing.eu"]');
      const queues = await page.locator("tr[data-queue]").evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset.queue));
      expect(queues.sort()).toEqual(["billing.eu", "billing.us"]);

      await page.goto(`http://127.0.0.1:${server.httpPort}/#/jobs`);
      await page.waitForSelector(`tr[data-jid="${jids.billing}"]`);
      const listed = await page.locator("tr[data-jid]").evaluateAll((rows) => rows.map((row) => (row as HTMLElement).dataset.jid));
      expect(listed).toContain(jids.billing);
      expect(listed).not.toContain(jids.payroll);

      // A job of another queue, by its jid: the page says it does not exist.
      await page.goto(`http://127.0.0.1:${server.httpPort}/#/job/${jids.payroll}`);
      await page.waitForFunction((jid) => document.body.textContent?.includes(`job ${jid} not found`), jids.payroll);
      expect(await page.locator("body").textContent()).not.toContain("salary.pay");

      await page.goto(`http://127.0.0.1:${server.httpPort}/#/`);
      await page.waitForSelector('[data-stat="live"]');
      // Live jobs over billing.* only: the ready one and the delayed one, not payroll's.
      expect(await page.locator('[data-stat="live"] .value').textContent()).toBe("2");
      expect(await page.locator("body").textContent()).not.toContain("payroll");
    } finally {
      await browser.close();
    }
  });
});
