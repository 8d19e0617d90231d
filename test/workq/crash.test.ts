import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { spawnServer, type ServerProcess } from "../e2e/support/server-process.js";
import { WorkqSocket } from "./support.js";

const idOf = (i: number) => `c0ffee00-0000-4000-8000-${String(i).padStart(12, "0")}`;

describe("kill -9 right after acknowledged Workq commands (real process)", () => {
  const dir = mkdtempSync(join(tmpdir(), "worq-workq-crash-"));
  let server: ServerProcess | undefined;
  afterAll(async () => {
    server?.child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  it("every job whose add was answered +OK is there after the restart, found by its Workq id, completed ones with their result", async () => {
    server = await spawnServer(dir, ["--workq-port", "0"]);
    const conn = await WorkqSocket.open(server.workqPort!);
    const count = 200;
    // Pipelined: every add in one write.
    conn.write(
      Array.from({ length: count }, (_, i) => `add ${idOf(i)} crash 60000 600000 2\r\n${String(i % 100).padStart(2, "0")}\r\n`).join(""),
    );
    expect(await conn.read(5 * count, 20_000)).toBe("+OK\r\n".repeat(count));
    // Lease and complete one, then stop at once.
    conn.write("lease crash 1000\r\n");
    const leased = await conn.read(7 + 36 + " crash 60000 2\r\n".length + 4);
    const id = leased.split("\r\n")[1]!.split(" ")[0]!;
    expect(await conn.send(`complete ${id} 4\r\ndone\r\n`, "+OK\r\n")).toBe("+OK\r\n");
    server.child.kill("SIGKILL");
    await server.exited;
    conn.close();

    server = await spawnServer(dir, ["--workq-port", "0"]);
    const after = await WorkqSocket.open(server.workqPort!);
    const result = `+OK 1\r\n${id} 1 4\r\ndone\r\n`;
    expect(await after.send(`result ${id} 0\r\n`, result)).toBe(result);
    after.write(Array.from({ length: count }, (_, i) => `inspect job ${idOf(i)}\r\n`).join(""));
    let replies = "";
    for (let tries = 0; tries < 50 && (replies.match(/^created /gm)?.length ?? 0) < count; tries++) replies += await after.drain(100);
    for (let i = 0; i < count; i++) expect(replies).toContain(`+OK 1\r\n${idOf(i)} 12\r\nname crash\r\n`);
    expect(replies.match(/^state 0\r$/gm)).toHaveLength(count - 1);
    // And a duplicate add is still refused: the ids are still claimed.
    const duplicate = "-CLIENT-ERROR Duplicate job\r\n";
    expect(await after.send(`add ${idOf(7)} crash 1000 60000 1\r\nx\r\n`, duplicate)).toBe(duplicate);
    after.close();
  });
});
