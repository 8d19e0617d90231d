// Builds the dashboard (browser code) into dist/dashboard/: type-checks it with its own
// tsconfig (lib dom, kept out of the server build), bundles main.ts with esbuild, and copies
// the static files. Run by `npm run build`.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "../..");
const out = join(root, "dist/dashboard");

execFileSync(process.execPath, [join(root, "node_modules/typescript/bin/tsc"), "-p", join(here, "tsconfig.json")], { stdio: "inherit" });
mkdirSync(out, { recursive: true });
const bundle = await build({
  entryPoints: [join(here, "main.ts")],
  outfile: join(out, "app.js"),
  bundle: true,
  format: "esm",
  target: "es2022",
  minify: true,
  sourcemap: true,
  legalComments: "none",
  logLevel: "warning",
  write: false,
});
// Each file replaced whole (written beside, then renamed over): a server already running
// from dist/ (the test suite's, while npm start builds) never serves half a file.
const replace = (path, contents) => {
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, contents);
  renameSync(temporary, path);
};
for (const file of bundle.outputFiles) replace(file.path, file.contents);
for (const file of ["index.html", "style.css", "favicon.svg"]) replace(join(out, file), readFileSync(join(here, file)));
