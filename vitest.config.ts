import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // e2e tests start servers and child processes; two cores on CI.
    maxWorkers: 2,
  },
});
