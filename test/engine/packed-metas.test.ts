// The engine suites again, with every waiting job's meta held packed (src/engine/live-jobs.ts):
// what a server with a backlog past its unpacked limit does for most of its jobs. The
// imports register their tests in this file; pack-all-metas must come first.
import "./pack-all-metas.js";
import "./engine.test.js";
import "./engine.property.test.js";
import "./ack-all.test.js";
import "./body-cache.test.js";
import "./callbacks.test.js";
import "./dependencies.test.js";
import "./idempotency.test.js";
import "./unique-debounce.test.js";
import "./kill-jobs.test.js";
import "./intern.test.js";
import "./lease-slots.test.js";
import "./lifetime-cancel-delete.test.js";
