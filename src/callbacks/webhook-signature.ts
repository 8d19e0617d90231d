import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";

/** The header carrying a webhook's signature. */
export const SIGNATURE_HEADER = "worq-signature";

/** Shortest secret accepted, in bytes: a shorter one can be guessed offline from one signed webhook. */
const MIN_SECRET_BYTES = 16;

/**
 * The `Worq-Signature` value for `body` sent at `unixSeconds`: `t=<seconds>,v1=<hex>`, where
 * the hex is HMAC-SHA256(secret, "<seconds>.<body>"). The time is signed with the body so a
 * receiver can refuse a replayed old webhook by `t` (docs/webhooks.md has the checks).
 */
export function webhookSignature(secret: Buffer, body: string, unixSeconds: number): string {
  const digest = createHmac("sha256", secret).update(`${unixSeconds}.${body}`).digest("hex");
  return `t=${unixSeconds},v1=${digest}`;
}

/**
 * Reads the --webhook-secret-file secret: the file's bytes without trailing whitespace (an
 * editor's newline is not part of the key). Throws a readable Error when the file cannot be
 * read or the secret is shorter than 16 bytes.
 */
export function readWebhookSecret(file: string): Buffer {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new Error(`--webhook-secret-file: cannot read ${file}: ${(error as Error).message}`);
  }
  const secret = Buffer.from(text.replace(/\s+$/, ""), "utf8");
  if (secret.length < MIN_SECRET_BYTES) {
    throw new Error(
      `--webhook-secret-file: ${file} holds ${secret.length} bytes; a secret needs at least ${MIN_SECRET_BYTES} (e.g. openssl rand -hex 32 > ${file})`,
    );
  }
  return secret;
}
