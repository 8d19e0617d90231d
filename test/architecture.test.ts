import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = join(import.meta.dirname, "../src");
const CLIENT = join(import.meta.dirname, "../packages/client");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith(".ts") ? [join(dir, entry.name)] : [],
  );
}

function importsOf(file: string): string[] {
  return [...readFileSync(file, "utf8").matchAll(/^\s*(?:import|export)\b(?:[^'"]*?\bfrom\s+|\s+)["']([^"']+)["']/gm)].map((m) => m[1]!);
}

/** The top-level place under src/ that `file` is in: its directory, or "root" for src/*.ts. */
function placeOf(file: string): string {
  const parts = relative(SRC, file).split("/");
  return parts.length > 1 ? parts[0]! : "root";
}

/**
 * Import directions between the top-level parts of src/ (CONTRIBUTING.md): the job model
 * (model) is at the bottom; the engine builds on it; storage implements the engine's Store
 * contract; the doors (transport, http) and the rest build on the engine. Each rule lists
 * the parts of src/ a part may import (its own files always); anything else is an offender.
 */
describe("import directions", () => {
  const files = sourceFiles(SRC);
  /** `file -> import` for each relative import of `place`'s files that reaches a part of src/ not allowed. */
  const crossings = (place: string, allowed: readonly string[], allowedFiles: readonly string[] = []) =>
    files
      .filter((file) => placeOf(file) === place)
      .flatMap((file) =>
        importsOf(file)
          .filter((spec) => spec.startsWith("."))
          .filter((spec) => {
            const target = resolve(dirname(file), spec);
            if (!target.startsWith(SRC + "/")) return false; // generated code outside src/ (gen/)
            const to = placeOf(target);
            return to !== place && !allowed.includes(to) && !allowedFiles.includes(relative(SRC, target).replace(/\.js$/, ".ts"));
          })
          .map((spec) => `${relative(SRC, file)} -> ${spec}`),
      );

  it("src/model (the job model) imports no other part of src", () => {
    expect(files.some((file) => placeOf(file) === "model")).toBe(true);
    expect(crossings("model", [])).toEqual([]);
  });

  it("src/engine imports only the job model", () => {
    expect(crossings("engine", ["model"])).toEqual([]);
  });

  it("src/storage imports only the job model and the engine's Store contract (engine/store.ts)", () => {
    expect(crossings("storage", ["model"], ["engine/store.ts"])).toEqual([]);
  });

  it("src/formats (job JSON shapes) imports only the job model", () => {
    expect(crossings("formats", ["model"])).toEqual([]);
  });

  it("src/transport (the gRPC services) imports the engine, the job model and the server's own files (log, config) only", () => {
    expect(crossings("transport", ["engine", "model", "root"])).toEqual([]);
  });

  it("src/http (the HTTP port) imports the engine, the job model, the formats, the services and the server's own files only", () => {
    expect(crossings("http", ["engine", "model", "formats", "transport", "root"])).toEqual([]);
  });

  it("src/callbacks (webhooks) imports the engine, the job model, the formats and the server's own files only", () => {
    expect(crossings("callbacks", ["engine", "model", "formats", "root"])).toEqual([]);
  });

  it("src/cluster imports the doors (gRPC, HTTP, Faktory's and Workq's ports), storage, the job model and the server's own files, never the engine directly", () => {
    expect(crossings("cluster", ["transport", "http", "faktory", "workq", "storage", "model", "root"])).toEqual([]);
  });

  it("src/dashboard (a browser bundle) imports no other part of src", () => {
    expect(crossings("dashboard", [])).toEqual([]);
  });

  it("nothing imports src/cli: the command line is the top", () => {
    const places = [...new Set(files.map(placeOf))].filter((place) => place !== "cli");
    expect(places.flatMap((place) => crossings(place, places))).toEqual([]);
  });
});

/**
 * Layer rules (CONTRIBUTING.md): the job model and the engine are pure domain logic: no
 * gRPC, no protobuf, no storage backend, no file or network I/O.
 */
describe("layer rules", () => {
  const files = sourceFiles(SRC);

  it.each([
    // The client package's wire helpers are plain byte writers (the meta record's), and its partition
    // placement is the rule library and server must share; its generated code and the rest are not.
    [
      "model",
      /^(?:@grpc\/|@connectrpc\/|@bufbuild\/|level$|node:(?:fs|net|http|http2|child_process)|@worq\/client(?!\/wire\/|\/partition\.js$))/,
    ],
    ["engine", /^(?:@grpc\/|@connectrpc\/|@bufbuild\/|level$|node:(?:fs|net|http|http2|child_process)|@worq\/client)/],
    ["storage", /^(?:@grpc\/|@connectrpc\/|@bufbuild\/|@worq\/client\/gen\/)/],
  ])("src/%s imports nothing it must not", (layer, forbidden) => {
    const offenders = files
      .filter((file) => relative(SRC, file).startsWith(`${layer}/`))
      .flatMap((file) =>
        importsOf(file)
          .filter((spec) => forbidden.test(spec))
          .map((spec) => `${relative(SRC, file)} -> ${spec}`),
      );
    expect(offenders).toEqual([]);
  });

  it("no storage backend imports a sibling backend (storage/level, storage/postgres, storage/memory): shared parts live in src/storage/", () => {
    const backends = ["level", "postgres", "memory"];
    const offenders = files
      .filter((file) => backends.some((backend) => relative(SRC, file).startsWith(`storage/${backend}/`)))
      .flatMap((file) => {
        const own = relative(SRC, file).split("/")[1]!;
        const siblings = new RegExp(`^\\.\\./(?:${backends.filter((backend) => backend !== own).join("|")})/`);
        return importsOf(file)
          .filter((spec) => siblings.test(spec))
          .map((spec) => `${relative(SRC, file)} -> ${spec}`);
      });
    expect(offenders).toEqual([]);
  });

  it("keys of the LevelDB keyspace are built only in keys.ts", () => {
    const offenders = files
      .filter((file) => !file.endsWith("keys.ts"))
      .filter((file) => /["'`](?:j|b|r|l|m)\/["'`$]/.test(readFileSync(file, "utf8")));
    expect(offenders.map((file) => relative(SRC, file))).toEqual([]);
  });
});

/**
 * Engine rules: one small core (engine-core.ts) alone changes jobs and writes them; every other
 * engine file holds one concern and asks the core. The engine has no timers of its own.
 */
describe("engine rules", () => {
  const engineFiles = sourceFiles(join(SRC, "engine"));
  const name = (file: string) => relative(SRC, file);
  const offenders = (files: string[], pattern: RegExp) => files.filter((file) => pattern.test(readFileSync(file, "utf8"))).map(name);

  it("only engine-core.ts applies transition() and dependencyFailed() (state-machine.ts defines them)", () => {
    const others = sourceFiles(SRC).filter((file) => !/engine\/(?:engine-core|state-machine)\.ts$/.test(file));
    expect(offenders(others, /\b(?:transition|dependencyFailed)\(/)).toEqual([]);
    expect(offenders(engineFiles, /\btransition\(meta, event/)).toEqual(["engine/engine-core.ts"]); // the rule is not vacuous
  });

  it("only engine-core.ts writes to the store (store.commit)", () => {
    const others = engineFiles.filter((file) => !file.endsWith("engine-core.ts"));
    expect(offenders(others, /\.commit\(/)).toEqual([]);
  });

  it("the engine sets no timers of its own (setTimeout, setInterval): its owner drives tick() on the injected clock", () => {
    expect(offenders(engineFiles, /\b(?:setTimeout|setInterval|setImmediate)\(/)).toEqual([]);
  });

  it("no file in src/engine is over 400 lines", () => {
    const long = engineFiles.flatMap((file) => {
      const lines = readFileSync(file, "utf8").split("\n").length - 1;
      return lines > 400 ? [`${name(file)}: ${lines} lines`] : [];
    });
    expect(long).toEqual([]);
  });
});

/**
 * The client package (@worq/client) is what a producer or worker installs: it must build and
 * run without the server, so it reaches nothing outside its own directory and declares none
 * of the server's libraries.
 */
describe("client package rules", () => {
  const files = sourceFiles(join(CLIENT, "src"));
  const manifest = JSON.parse(readFileSync(join(CLIENT, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
    peerDependencies: Record<string, string>;
    peerDependenciesMeta: Record<string, { optional?: boolean }>;
  };
  /** The one optional peer, and the only file that may import it (reached as @worq/client/grpc-js, never from the index). */
  const GRPC_JS_TRANSPORT = join(CLIENT, "src", "grpc-js-transport.ts");
  /** The other optional peer, @opentelemetry/api: only tracing.ts names it (its types; the module is loaded at run time when present). */
  const TRACING = join(CLIENT, "src", "tracing.ts");

  it("packages/client imports nothing of the server: only its own files, node: built-ins and its declared dependencies", () => {
    expect(files.length).toBeGreaterThan(10);
    const offenders = files.flatMap((file) =>
      importsOf(file)
        .filter((spec) => {
          if (spec.startsWith(".")) return !resolve(dirname(file), spec).startsWith(join(CLIENT, "src") + "/");
          if (spec.startsWith("node:")) return false;
          const name = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!;
          if (name === "@grpc/grpc-js" && file === GRPC_JS_TRANSPORT) return false;
          if (name === "@opentelemetry/api" && file === TRACING) return false;
          return !(name in manifest.dependencies);
        })
        .map((spec) => `${relative(CLIENT, file)} -> ${spec}`),
    );
    expect(offenders).toEqual([]);
  });

  it("packages/client depends on no server library (storage, gRPC server, metrics, logging, CLI)", () => {
    const serverOnly = [
      "level",
      "classic-level",
      "pg",
      "prom-client",
      "pino",
      "commander",
      "@grpc/grpc-js",
      "@grpc/reflection",
      "grpc-health-check",
    ];
    expect(Object.keys(manifest.dependencies).filter((name) => serverOnly.includes(name))).toEqual([]);
    expect(Object.keys(manifest.dependencies).sort()).toEqual(["@bufbuild/protobuf", "@connectrpc/connect", "@connectrpc/connect-node"]);
  });

  it("@grpc/grpc-js is an optional peer, for createGrpcJsTransport alone: no other file of the package reaches it", () => {
    expect(manifest.peerDependencies).toEqual({ "@grpc/grpc-js": expect.any(String), "@opentelemetry/api": expect.any(String) });
    expect(manifest.peerDependenciesMeta["@grpc/grpc-js"]?.optional).toBe(true);
    expect(manifest.peerDependenciesMeta["@opentelemetry/api"]?.optional).toBe(true);
    const reaching = files.filter(
      (file) =>
        file !== GRPC_JS_TRANSPORT && importsOf(file).some((spec) => spec.startsWith("@grpc/") || spec.includes("grpc-js-transport")),
    );
    expect(reaching.map((file) => relative(CLIENT, file))).toEqual([]);
  });
});
