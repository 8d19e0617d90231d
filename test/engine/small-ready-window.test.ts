// The engine suites again with a ready window of two jobs per level (src/engine/ready-queue.ts):
// what a server with a backlog deeper than its window does for most of its jobs (paged in
// from the store, cancelled, deleted, listed and counted while cold). The imports register
// their tests in this file; small-ready-window must come first.
import "./small-ready-window.js";
import "./engine.test.js";
import "./engine.property.test.js";
import "./ack-all.test.js";
import "./body-cache.test.js";
import "./callbacks.test.js";
import "./dependencies.test.js";
import "./idempotency.test.js";
import "./unique-debounce.test.js";
import "./kill-jobs.test.js";
import "./lease-slots.test.js";
import "./lifetime-cancel-delete.test.js";
