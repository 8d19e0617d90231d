import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { connect } from "./support/clients.js";

const ROOT = join(import.meta.dirname, "../..");

describe("npm start", () => {
  it("passes flags after -- through to `worq serve` and stops on SIGTERM", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "worq-npm-start-"));
    // detached: npm runs node as a child; signal the whole process group.
    const child = spawn("npm", ["start", "--silent", "--", "--port", "0", "--data-dir", dataDir, "--log-level", "warn"], {
      cwd: ROOT,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      // npm start builds first (tsc, then the dashboard's type-check and bundle): beside the
      // rest of the suite on 2 cores that alone has taken most of a minute.
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout! }).on("line", (text) => text.includes("worq listening") && resolve(text));
        void exited.then((code) => reject(new Error(`npm start exited (${code}) before its listening line; stderr:\n${stderr}`)));
        setTimeout(() => reject(new Error(`npm start did not print its listening line within 150 s; stderr:\n${stderr}`)), 150_000);
      });
      const listening = JSON.parse(line) as { grpcPort: number; dataDir: string; pid: number };
      expect(listening.dataDir).toBe(dataDir);
      expect(listening.grpcPort).toBeGreaterThan(0);
      const info = await connect(listening.grpcPort).admin.getServerInfo({});
      expect(info.store).toBe("leveldb");
      process.kill(listening.pid, "SIGTERM"); // the server, not npm: npm then exits with its code
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) process.kill(-child.pid!, "SIGKILL");
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 180_000);
});
