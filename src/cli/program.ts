import { Command } from "commander";
import { serveCommand, serveConfig, type ServerConfig } from "../config.js";
import { packageVersion } from "../package-root.js";
import { registerBatches } from "./commands/batches.js";
import { registerGet } from "./commands/get.js";
import { registerImport } from "./commands/import.js";
import { registerInfo } from "./commands/info.js";
import { registerJobAdmin } from "./commands/job-admin.js";
import { registerJobs } from "./commands/jobs.js";
import { registerQueues } from "./commands/queues.js";
import { registerResult } from "./commands/result.js";
import { registerSchedules } from "./commands/schedules.js";
import { registerStoreAdmin } from "./commands/store-admin.js";
import { registerSubmit } from "./commands/submit.js";
import { registerToken } from "./commands/token.js";
import { registerWorkers } from "./commands/workers.js";
import { withGlobalOptions } from "./command-context.js";
import { EXIT_CODES_HELP } from "./exit-codes.js";

const GUIDE = `
Start a server, then talk to it from another terminal:
  worq serve                                        gRPC on 127.0.0.1:7419, data in ./worq-data
  worq submit email.send --queue mail --args '["a@example.com"]'
  worq get <jid>                                    the job, its state and failure
  worq result <jid> --wait 30s                      wait for it to finish
  worq jobs --queue mail --state scheduled          what is waiting
  worq info                                         is the server up, how busy is it

Every client command takes --server <host:port> (default $WORQ_SERVER, else 127.0.0.1:7419),
--json (one JSON document on stdout, for scripts) and --timeout <duration> (default 10s),
before or after the command name.
Payload bytes are never printed unless asked (--show-payload): they may be sensitive.

Environment:
  WORQ_SERVER   server address for client commands (host:port, or https://host:port)
  WORQ_TOKEN    bearer token for a server that checks tokens (see worq token --help)
  WORQ_TLS_CA, WORQ_CLIENT_CERT, WORQ_CLIENT_KEY   TLS files, as --tls-ca, --tls-cert, --tls-key
  WORQ_*        the server's settings: see worq serve --help

${EXIT_CODES_HELP}`;

/**
 * The `worq` command tree. Client commands live in commands/; `serve`'s flags are defined and
 * checked in src/config.ts (serveCommand, serveConfig), and `startServe` runs the server.
 */
export function createProgram(startServe: (config: ServerConfig) => Promise<void>): Command {
  const program = new Command("worq")
    .description("Worq: a durable, polyglot background-job server, and the tool to operate it.")
    .version(packageVersion(), "-V, --version", "print the version")
    .enablePositionalOptions()
    .exitOverride()
    .showHelpAfterError("(see worq --help)")
    .configureOutput({ outputError: (text, write) => write(text.replace(/^error: /, "worq: ")) })
    .helpCommand("help [command]", "show help for a command")
    .addHelpText("after", GUIDE);
  withGlobalOptions(program);

  const serve = serveCommand()
    .copyInheritedSettings(program)
    // Every error, commander's (an unknown flag) or serveConfig's (a bad value), is
    // `worq serve: …` followed by the flags.
    .configureOutput({ outputError: (text, write) => write(`worq serve: ${text.replace(/^error: /, "")}`) })
    .showHelpAfterError()
    .action(async (_options: unknown, command: Command) => {
      let config: ServerConfig;
      try {
        config = serveConfig(command.opts());
      } catch (error) {
        command.error((error as Error).message);
      }
      await startServe(config);
    });
  program.addCommand(serve);

  registerSubmit(program);
  registerGet(program);
  registerImport(program);
  registerResult(program);
  registerBatches(program);
  registerJobs(program);
  registerQueues(program);
  registerSchedules(program);
  registerWorkers(program);
  registerJobAdmin(program);
  registerInfo(program);
  registerToken(program);
  registerStoreAdmin(program);
  return program;
}
