/**
 * Runs `fn(scope)` where `scope.server(...)` and `scope.child(...)` start things through the
 * context that are all stopped when `fn` ends, normally or not. Children are asked to exit
 * (then killed), servers stopped gracefully.
 */
export async function withScope(ctx, fn) {
  const servers = [];
  const children = [];
  const scope = {
    async server(peerId, tag, options) {
      const server = await ctx.startServer(peerId, tag, options);
      servers.push(server);
      return server;
    },
    child(peerId, kind, config) {
      const child = ctx.child(peerId, kind, config);
      children.push(child);
      return child;
    },
  };
  try {
    return await fn(scope);
  } finally {
    await Promise.all(children.map((child) => child.close(5_000)));
    for (const server of servers) await server.stop();
  }
}

/** Runs one measurement; a failure is logged and returned as { error } so the others go on. */
export async function attempt(ctx, label, fn) {
  try {
    return await fn();
  } catch (error) {
    ctx.log(`FAILED ${label}: ${String(error?.message ?? error).split("\n")[0]}`);
    process.stderr.write(`${error?.stack ?? error}\n`);
    return { error: String(error?.message ?? error).slice(0, 2000) };
  }
}
