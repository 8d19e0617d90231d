import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { commandWorks, toolAvailable } from "../../support/require-tool.js";

const LAZYFS = fileURLToPath(new URL("./lazyfs.py", import.meta.url));
const PYTHON = "/usr/bin/python3"; // Debian's python3-fusepy installs for the system Python

export type FaultMode = "ok" | "enospc" | "erofs" | "stall";

/**
 * Whether the lazy FUSE filesystem can run here. No /dev/fuse (a container without FUSE) is
 * the one case skipped even under WORQ_REQUIRE_ALL=1: no package can provide a kernel device.
 * Missing fuse3 / python3-fusepy is skipped locally and fails under WORQ_REQUIRE_ALL=1.
 */
export function lazyFsAvailable(): boolean {
  if (!existsSync("/dev/fuse")) {
    process.stderr.write("skipping FUSE fault tests: /dev/fuse is missing (no FUSE in this kernel/container)\n");
    return false;
  }
  return toolAvailable(
    "FUSE fault filesystem",
    () => commandWorks("fusermount3", ["-V"]) && commandWorks(PYTHON, ["-c", "import fusepy"]),
    "fuse3 or python3-fusepy missing: run `bash scripts/install-fault-tools.sh`",
  );
}

/**
 * The lazy filesystem (lazyfs.py) mounted over `<root>/mnt`, backed by `<root>/backing`.
 * `powerCut()` kills it with SIGKILL, so everything not fsync'd is gone, and unmounts (the
 * kernel's page cache of the mount goes with it); `mount()` brings it back on the same backing.
 */
export class LazyMount {
  readonly backing: string;
  readonly mountpoint: string;
  private readonly control: string;
  private daemon: ChildProcess | undefined;
  private daemonErr = "";

  constructor(root: string) {
    this.backing = join(root, "backing");
    this.mountpoint = join(root, "mnt");
    this.control = join(root, "fault-mode");
    mkdirSync(this.backing, { recursive: true });
    mkdirSync(this.mountpoint, { recursive: true });
    writeFileSync(this.control, "ok");
  }

  async mount(): Promise<void> {
    this.daemonErr = "";
    this.daemon = spawn(PYTHON, [LAZYFS, this.backing, this.mountpoint, this.control], { stdio: ["ignore", "ignore", "pipe"] });
    this.daemon.stderr!.on("data", (chunk: Buffer) => (this.daemonErr += chunk.toString()));
    const deadline = Date.now() + 10_000;
    while (!this.mounted()) {
      if (Date.now() > deadline || this.daemon.exitCode !== null) throw new Error(`lazyfs did not mount: ${this.daemonErr}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Makes writes fail from now on (or work again: "ok"). */
  setMode(mode: FaultMode): void {
    writeFileSync(this.control, mode);
  }

  /** Power loss: unsynced data is dropped, the mount disappears. */
  async powerCut(): Promise<void> {
    const daemon = this.daemon;
    if (daemon && daemon.exitCode === null) {
      const exited = new Promise((resolve) => daemon.once("exit", resolve));
      daemon.kill("SIGKILL");
      await exited;
    }
    this.daemon = undefined;
    this.detach();
  }

  async unmount(): Promise<void> {
    this.detach();
    const daemon = this.daemon;
    if (daemon && daemon.exitCode === null) {
      const exited = new Promise((resolve) => daemon.once("exit", resolve));
      daemon.kill("SIGTERM");
      await exited;
    }
    this.daemon = undefined;
  }

  private detach(): void {
    if (!this.mounted()) return;
    try {
      execFileSync("fusermount3", ["-u", "-z", this.mountpoint], { stdio: "ignore" });
    } catch {
      execFileSync("umount", ["-l", this.mountpoint], { stdio: "ignore" });
    }
  }

  private mounted(): boolean {
    return readFileSync("/proc/mounts", "utf8")
      .split("\n")
      .some((line) => line.split(" ")[1] === this.mountpoint);
  }
}
