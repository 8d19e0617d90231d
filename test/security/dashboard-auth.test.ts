import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ProducerService } from "@worq/client/gen/worq/v1/producer_service_pb.js";
import { chromiumAvailable, launchBrowser } from "../dashboard/support/browser.js";
import { startSecureServer, TOKENS, type SecureServer } from "./support/secure-server.js";

const hasChromium = chromiumAvailable();

/** The dashboard against a server that checks tokens: the real UNAUTHENTICATED and PERMISSION_DENIED answers. */
describe("the dashboard on a server with --auth-tokens", { timeout: 60_000 }, () => {
  let server: SecureServer;
  let base: string;
  beforeAll(async () => {
    server = await startSecureServer();
    base = `http://127.0.0.1:${server.httpPort}`;
    const transport = createGrpcTransport({
      baseUrl: `http://127.0.0.1:${server.port}`,
      interceptors: [(next) => (request) => (request.header.set("authorization", `Bearer ${TOKENS.producer}`), next(request))],
    });
    await createClient(ProducerService, transport).submit({ job: { type: "mail.send", queue: "mail" } });
  });
  afterAll(async () => server?.close());

  it("serves its static files without a token (they hold no data)", async () => {
    expect((await fetch(`${base}/`)).status).toBe(200);
    expect((await fetch(`${base}/app.js`)).status).toBe(200);
  });

  it.skipIf(!hasChromium)(
    "asks for a token, shows the queues with an admin token, and reports a worker token's PERMISSION_DENIED",
    async () => {
      const browser = await launchBrowser();
      try {
        const page = await browser.context.newPage();
        await page.goto(`${base}/#/queues`);
        await page.waitForSelector('input[name="token"]');
        await page.fill('input[name="token"]', TOKENS.admin);
        await page.click('button:has-text("Use token")');
        await page.waitForSelector('tr[data-queue="mail"]');

        await page.evaluate((token) => sessionStorage.setItem("worq.token", token), TOKENS.worker);
        await page.reload();
        await page.waitForFunction(() => document.body.textContent?.includes("may not call"));
        expect(await page.locator("body").textContent()).toContain('the worker token "test-worker" may not call worq.v1.AdminService/');
        expect(await page.locator('input[name="token"]').count()).toBe(0);
      } finally {
        await browser.close();
      }
    },
  );
});
