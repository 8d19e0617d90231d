// Child process: the Go raw-stub producer (main.go), with this process's stdio.
import { runGo } from "./run-go.mjs";

runGo("producer");
