/**
 * Faktory's handshake: the server greets (`+HI {"v":2}`, with an iteration count and a salt
 * when it has passwords), the client answers `HELLO {json}` with who it is and, when asked,
 * proof of its password: SHA-256 of password ‖ salt, hashed again iterations − 1 times over
 * the raw digest, in lowercase hex. A client that says no protocol version (or one below 2)
 * hashes once, as Faktory's server accepts.
 *
 * The passwords are Worq tokens (or, without token auth, one shared password): a client that
 * proves one acts with that token's role and queues. Tokens are long random strings, so the
 * iterated hash only proves possession; the count is kept small because the server tries it
 * against each configured password on every connection.
 */
import { createHash, randomBytes, randomInt, timingSafeEqual } from "node:crypto";
import type { Caller } from "../transport/auth/access-control.js";
import { FaktoryError } from "./payload.js";
import type { Hello } from "./workers.js";

/** A password a Faktory client may present, and who it then acts as. */
export interface FaktoryPassword {
  password: string;
  caller: Caller;
}

export interface Challenge {
  iterations: number;
  salt: string;
}

/** The greeting line, and the challenge it carries when passwords are required. */
export function greeting(passwords: readonly FaktoryPassword[]): { line: Buffer; challenge?: Challenge } {
  if (passwords.length === 0) return { line: Buffer.from('+HI {"v":2}\r\n') };
  const challenge = { iterations: randomInt(100, 200), salt: randomBytes(8).toString("hex") };
  return { line: Buffer.from(`+HI {"v":2,"i":${challenge.iterations},"s":"${challenge.salt}"}\r\n`), challenge };
}

/** Faktory's password proof, in lowercase hex. */
export function passwordHash(password: string, salt: string, iterations: number): string {
  let digest = createHash("sha256").update(password, "utf8").update(salt, "utf8").digest();
  for (let i = 1; i < iterations; i++) digest = createHash("sha256").update(digest).digest();
  return digest.toString("hex");
}

/**
 * Reads a HELLO's JSON: who the client is and, with passwords, which password it proved.
 * Throws FaktoryError ("Invalid password" when the proof matches none).
 */
export function acceptHello(
  argText: string,
  passwords: readonly FaktoryPassword[],
  challenge: Challenge | undefined,
  anonymous: Caller,
): { hello: Hello; caller: Caller; password?: string } {
  let json: unknown;
  try {
    json = JSON.parse(argText);
  } catch (error) {
    throw new FaktoryError(`invalid JSON: ${(error as Error).message}`);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new FaktoryError("invalid HELLO: expected a JSON object");
  const obj = json as Record<string, unknown>;
  const text = (key: string) => {
    const value = obj[key];
    if (value !== undefined && value !== null && typeof value !== "string")
      throw new FaktoryError(`invalid HELLO: ${key} must be a string`);
    return (value as string | undefined) ?? "";
  };
  const wid = text("wid");
  const hostname = text("hostname");
  const pwdhash = text("pwdhash");
  const pid = obj.pid ?? 0;
  if (typeof pid !== "number" || !Number.isInteger(pid)) throw new FaktoryError("invalid HELLO: pid must be an integer");
  const labels = obj.labels ?? [];
  if (!Array.isArray(labels) || labels.some((label) => typeof label !== "string")) {
    throw new FaktoryError("invalid HELLO: labels must be an array of strings");
  }
  const version = obj.v;
  if (version !== undefined && (typeof version !== "number" || !Number.isInteger(version))) {
    throw new FaktoryError("invalid HELLO: v must be an integer");
  }
  if (typeof version === "number" && version > 2)
    throw new FaktoryError(`protocol version ${version} is not supported (this server speaks 2)`);
  if (wid.length > 200) throw new FaktoryError("invalid HELLO: wid must be at most 200 characters");
  const hello: Hello = {
    wid,
    hostname: hostname.slice(0, 255),
    pid,
    labels: (labels as string[]).slice(0, 50).map((label) => label.slice(0, 100)),
  };
  if (!challenge) return { hello, caller: anonymous };
  const iterations = version === undefined || version < 2 ? 1 : challenge.iterations;
  const presented = Buffer.from(pwdhash.toLowerCase(), "utf8");
  let proved: FaktoryPassword | undefined;
  for (const entry of passwords) {
    const expected = Buffer.from(passwordHash(entry.password, challenge.salt, iterations), "utf8");
    if (expected.byteLength === presented.byteLength && timingSafeEqual(expected, presented) && !proved) proved = entry;
  }
  if (!proved) throw new FaktoryError("Invalid password");
  return { hello, caller: proved.caller, password: proved.password };
}
