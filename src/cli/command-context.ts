import type { Command } from "commander";
import { connectTo, serverAddress, type Connection } from "./connection.js";
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
  if (options.json !== false) command.option("--json", "print one JSON document instead of a table");
  return command.showHelpAfterError(`(see worq ${command.name() === "worq" ? "" : `${command.name()} `}--help)`);
}

/** The value of `name` set closest to `command`: its own flag, else its parents'. */
export function optionOf<T>(command: Command, name: string): T | undefined {
  for (let at: Command | null = command; at; at = at.parent) {
    const value = at.opts()[name] as T | undefined;
    if (value !== undefined) return value;
  }
  return undefined;
}

export function contextOf(command: Command): CommandContext {
  return {
    connection: connectTo(serverAddress(optionOf<string>(command, "server")), optionOf<number>(command, "timeout")),
    json: optionOf<boolean | string>(command, "json") === true,
  };
}
