#!/usr/bin/env node
import { ConnectError } from "@connectrpc/connect";
import { CommanderError } from "commander";
import { serverErrorMessage } from "./connection.js";
import { commandPath } from "./command-context.js";
import { CliError, EXIT } from "./exit-codes.js";
import { createProgram } from "./program.js";

/**
 * The `worq` command: `worq serve` runs the server; every other command is a client of a
 * running server (see `worq --help`). Exit codes are listed in exit-codes.ts.
 */

let serving = false;

// `worq jobs … | head`: the reader closing the pipe early ends the output quietly, as in any
// Unix tool, instead of an EPIPE stack trace. A server keeps serving (it logs to stderr).
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error;
  if (!serving) process.exit(0);
});
const program = createProgram(async (config) => {
  serving = true;
  // Loaded on demand: client commands need not load the server (LevelDB, gRPC server).
  const { serve } = await import("./serve.js");
  await serve(config);
});

/** Reports `error` on stderr and returns the exit code it means. */
function report(error: unknown, command: string): number {
  if (error instanceof CommanderError) {
    // Commander has printed its message (or the help) already.
    const shown = error.code === "commander.helpDisplayed" || error.code === "commander.help" || error.code === "commander.version";
    return shown ? error.exitCode : EXIT.usage;
  }
  if (error instanceof CliError) {
    const hint = error.exitCode === EXIT.usage ? `\n(see worq ${command} --help)` : "";
    process.stderr.write(`worq${error.exitCode === EXIT.usage ? ` ${command}` : ""}: ${error.message}${hint}\n`);
    return error.exitCode;
  }
  if (error instanceof ConnectError) {
    process.stderr.write(`worq: ${serverErrorMessage(error)}\n`);
    return EXIT.failed;
  }
  process.stderr.write(`worq: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  return EXIT.failed;
}

/** Exits once stdout and stderr have been handed to the OS (process.exit alone can cut piped output). */
async function exit(code: number): Promise<never> {
  await Promise.all([process.stdout, process.stderr].map((stream) => new Promise<void>((done) => stream.write("", () => done()))));
  process.exit(code);
}

const argv = process.argv.slice(2);
if (argv.length === 0) {
  program.outputHelp();
  await exit(EXIT.ok);
}
let command = argv[0]!;
program.hook("preAction", (_root, actionCommand) => {
  command = commandPath(actionCommand);
});
try {
  await program.parseAsync(argv, { from: "user" });
} catch (error) {
  await exit(report(error, command));
}
if (!serving) await exit(typeof process.exitCode === "number" ? process.exitCode : EXIT.ok);
