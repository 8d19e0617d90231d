// Child process: the Go raw-stub worker (main.go), with this process's stdio.
import { runGo } from "./run-go.mjs";

runGo("worker");
