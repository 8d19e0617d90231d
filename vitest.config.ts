import { defineConfig } from "vitest/config";

// WORQ_TEST_REPORT=<file> also writes a JSON report there (CI reads it for its summary line).
const jsonReport = process.env.WORQ_TEST_REPORT;

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // e2e tests start servers and child processes; CI machines have two cores.
    maxWorkers: 2,
    reporters: jsonReport ? ["default", "json"] : ["default"],
    ...(jsonReport ? { outputFile: { json: jsonReport } } : {}),
  },
});
