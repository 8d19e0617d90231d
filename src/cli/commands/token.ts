import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { isRole, ROLES, type Role } from "../../transport/auth/roles.js";
import { ALL_QUEUES, parseQueueScope, type QueueScope } from "../../transport/auth/queue-scope.js";
import { hashToken, newToken, tokenFileLine } from "../../transport/auth/token-file.js";
import { usageError } from "../exit-codes.js";
import { print, printJson } from "../output.js";

/**
 * `worq token create` and `worq token hash`: make the lines of a server's --auth-tokens file.
 * They run offline: the server only ever stores the SHA-256 of a token.
 */
export function registerToken(program: Command): void {
  const token = program
    .command("token")
    .summary("make bearer tokens for a server's --auth-tokens file")
    .description("Makes bearer tokens and the lines of a server's --auth-tokens file (docs/security.md). Works offline.");

  token
    .command("create")
    .summary("print a new random token and its line for the token file")
    .requiredOption("--role <role>", `what the token may do: ${ROLES.join(", ")}`)
    .requiredOption("--name <name>", "who holds it (unique in the file; shows in logs, keys the rate limit)")
    .option(
      "--queues <patterns>",
      "limit the token to these queues: comma-separated names or globs (* matches any run), e.g. 'billing.*,invoices'",
    )
    .option("--json", "print one JSON document")
    .addHelpText(
      "after",
      "\nExamples:\n  worq token create --role producer --name billing-api >> secrets.txt\n  worq token create --role admin --name billing-ops --queues 'billing.*'",
    )
    .action((flags: { role: string; name: string; queues?: string; json?: boolean }) => {
      const role = roleOf(flags.role);
      const name = nameOf(flags.name);
      const scope = scopeOf(flags.queues);
      const value = newToken();
      const line = tokenFileLine(role, name, value, scope);
      if (flags.json) return printJson({ role, name, ...(scope.all ? {} : { queues: scope.text }), token: value, line });
      print(
        [
          `token: ${value}`,
          `line:  ${line}`,
          "",
          "Give the token to the client (WORQ_TOKEN, or the libraries' token option); it is shown only now.",
          "Add the line to the server's --auth-tokens file, then reload it: kill -HUP <server pid>.",
        ].join("\n"),
      );
    });

  token
    .command("hash")
    .summary("print the hash of an existing token (read from stdin), or its line with --role and --name")
    .option("--role <role>", `with --name: print the whole line for this role (${ROLES.join(", ")})`)
    .option("--name <name>", "with --role: the token holder's name")
    .option("--queues <patterns>", "with --role: limit the line to these queues (as for token create)")
    .addHelpText("after", '\nExample:\n  printf %s "$TOKEN" | worq token hash --role worker --name billing-workers')
    .action((flags: { role?: string; name?: string; queues?: string }) => {
      const value = readFileSync(0, "utf8").trim();
      if (value === "") throw usageError("no token on stdin");
      if ((flags.role === undefined) !== (flags.name === undefined)) throw usageError("--role and --name go together");
      if (flags.queues !== undefined && flags.role === undefined) throw usageError("--queues needs --role and --name");
      if (flags.role !== undefined) return print(tokenFileLine(roleOf(flags.role), nameOf(flags.name!), value, scopeOf(flags.queues)));
      print(`sha256:${hashToken(value).toString("hex")}`);
    });
}

function roleOf(text: string): Role {
  if (!isRole(text)) throw usageError(`--role must be one of ${ROLES.join(", ")}; got ${JSON.stringify(text)}`);
  return text;
}

function nameOf(text: string): string {
  if (!/^[\w.@:-]+$/.test(text)) throw usageError(`--name must be letters, digits and . _ - @ : only; got ${JSON.stringify(text)}`);
  return text;
}

function scopeOf(text: string | undefined): QueueScope {
  if (text === undefined) return ALL_QUEUES;
  try {
    return parseQueueScope(text);
  } catch (error) {
    throw usageError(`--queues: ${(error as Error).message.replace(/^queues=: /, "")}`);
  }
}
