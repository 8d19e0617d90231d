import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { ALL_QUEUES, parseQueueScope, type QueueScope } from "./queue-scope.js";
import { isRole, ROLES, type Role } from "./roles.js";

/** One line of the token file: the server keeps only the hash of a token, never the token. */
export interface TokenEntry {
  role: Role;
  /** Who holds the token, for logs and the per-token rate limit; unique in the file. */
  name: string;
  /** SHA-256 of the token's UTF-8 bytes. */
  sha256: Buffer;
  /** The queues the token may touch (`queues=` on its line; every queue without it). */
  scope: QueueScope;
}

const PREFIX = "worq_";

/** A new random token: 32 bytes from the OS CSPRNG, base64url, with a recognisable prefix. */
export function newToken(): string {
  return PREFIX + randomBytes(32).toString("base64url");
}

export function hashToken(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** The token file line that grants `token` the `role` under `name`, limited to `scope` when it is not every queue. */
export function tokenFileLine(role: Role, name: string, token: string, scope: QueueScope = ALL_QUEUES): string {
  const line = `${role} ${name} sha256:${hashToken(token).toString("hex")}`;
  return scope.all ? line : `${line} queues=${scope.text}`;
}

/**
 * Parses a token file: one `<role> <name> sha256:<64 hex> [queues=<pattern>,...]` per line;
 * blank lines and lines starting with # are ignored. Without `queues=` a token may touch
 * every queue (files written before scopes existed mean what they meant). Throws an Error naming the file and line on anything else,
 * so a typo never silently locks a client out (or in).
 */
export function parseTokenFile(text: string, fileName: string): TokenEntry[] {
  const entries: TokenEntry[] = [];
  const names = new Set<string>();
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) return;
    const where = `${fileName}:${index + 1}`;
    const fields = line.split(/\s+/);
    if (fields.length !== 3 && fields.length !== 4) {
      throw new Error(`${where}: expected "<role> <name> sha256:<hex> [queues=<patterns>]", got ${fields.length} fields`);
    }
    const [role, name, hash, scopeField] = fields as [string, string, string, string | undefined];
    if (!isRole(role)) throw new Error(`${where}: role must be one of ${ROLES.join(", ")}; got ${JSON.stringify(role)}`);
    // A name is shown in logs and keys a caller's claims and rate bucket, which the store keeps as text (no NUL in PostgreSQL's).
    if (/[\u0000-\u001f\u007f]/.test(name)) throw new Error(`${where}: the name ${JSON.stringify(name)} holds a control character`);
    if (names.has(name)) throw new Error(`${where}: the name ${JSON.stringify(name)} is used twice`);
    const match = /^sha256:([0-9a-f]{64})$/i.exec(hash);
    if (!match) throw new Error(`${where}: the hash must be sha256:<64 hex digits> (see worq token create)`);
    names.add(name);
    entries.push({
      role,
      name,
      sha256: Buffer.from(match[1]!, "hex"),
      scope: scopeField === undefined ? ALL_QUEUES : scopeOf(scopeField, where),
    });
  });
  return entries;
}

function scopeOf(field: string, where: string): QueueScope {
  if (!field.startsWith("queues="))
    throw new Error(
      `${where}: the fourth field must be queues=<pattern>,..., e.g. queues=billing.*,invoices; got ${JSON.stringify(field)}`,
    );
  try {
    return parseQueueScope(field.slice("queues=".length));
  } catch (error) {
    throw new Error(`${where}: ${(error as Error).message}`);
  }
}

export function loadTokenFile(path: string): TokenEntry[] {
  return parseTokenFile(readFileSync(path, "utf8"), path);
}
