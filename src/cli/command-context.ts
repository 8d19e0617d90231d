import type { Command } from "commander";
import { connectTo, securityFrom, serverAddress, type Connection } from "./connection.js";
import { positiveDurationMs } from "./flag-values.js";

/** What every client command is given: where the server is, and how to print. */
export interface CommandContext {
  connection: Connection;
  /** --json: one JSON document on stdout instead of tables. */
  json: boolean;
}

/**
 * Adds the options every client command takes. They are accepted before the command
 * (`worq --json jobs`) and after it (`worq jobs --json`); after wins.
 */
export function withGlobalOptions(command: Command, options: { json?: boolean } = {}): Command {
  command.option("--server <host:port>", "Worq server to talk to [WORQ_SERVER] (default 127.0.0.1:7419)");
  command.option("--timeout <duration>", "give up on a call the server has not answered after this long (default 10s)", positiveDurationMs);
  command.option("--token <token>", "bearer token for a server with --auth-tokens [WORQ_TOKEN] (the variable keeps it out of ps)");
  command.option("--tls", "connect over TLS, trusting the system's CAs (implied by the --tls-* flags and https:// addresses)");
  command.option("--tls-ca <file>", "PEM CA certificate(s) to verify the server with [WORQ_TLS_CA]");
  command.option("--tls-cert <file>", "PEM client certificate, for a server that requires mutual TLS [WORQ_CLIENT_CERT]");
  command.option("--tls-key <file>", "PEM private key of --tls-cert [WORQ_CLIENT_KEY]");
  if (options.json !== false) command.option("--json", "print one JSON document instead of a table");
  const path = commandPath(command);
  return command.showHelpAfterError(`(see worq ${path ? `${path} ` : ""}--help)`);
}

/** A command's words after `worq` ("schedule add"): usage hints must name a command that exists. */
export function commandPath(command: Command): string {
  const names: string[] = [];
  for (let at: Command | null = command; at?.parent; at = at.parent) names.unshift(at.name());
  return names.join(" ");
}

/** The value of `name` set closest to `command`: its own flag, else its parents'. */
function optionOf<T>(command: Command, name: string): T | undefined {
  for (let at: Command | null = command; at; at = at.parent) {
    const value = at.opts()[name] as T | undefined;
    if (value !== undefined) return value;
  }
  return undefined;
}

export function contextOf(command: Command): CommandContext {
  return {
    connection: connectTo(
      serverAddress(optionOf<string>(command, "server")),
      optionOf<number>(command, "timeout"),
      securityFrom({
        token: optionOf<string>(command, "token"),
        tls: optionOf<boolean>(command, "tls"),
        tlsCa: optionOf<string>(command, "tlsCa"),
        tlsCert: optionOf<string>(command, "tlsCert"),
        tlsKey: optionOf<string>(command, "tlsKey"),
      }),
    ),
    json: optionOf<boolean | string>(command, "json") === true,
  };
}
