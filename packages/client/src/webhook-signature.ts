import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Whether a Worq webhook is genuine: `header` is its Worq-Signature header
 * ("t=<unix seconds>,v1=<hex>"), `rawBody` the request body exactly as received (before any
 * JSON parsing), `secret` the content of the server's --webhook-secret-file without its
 * trailing newline. Refuses a signature older than `toleranceSeconds`, so a recorded webhook
 * cannot be replayed later.
 */
export function verifyWebhookSignature(
  secret: string,
  header: string | undefined,
  rawBody: Buffer,
  nowSeconds = Math.floor(Date.now() / 1000),
  toleranceSeconds = 300,
): boolean {
  const fields = new Map((header ?? "").split(",").map((part) => part.trim().split("=", 2) as [string, string]));
  const t = Number(fields.get("t"));
  const v1 = fields.get("v1") ?? "";
  if (!Number.isInteger(t) || Math.abs(nowSeconds - t) > toleranceSeconds) return false;
  const expected = createHmac("sha256", secret).update(`${t}.`).update(rawBody).digest();
  const given = Buffer.from(v1, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}
