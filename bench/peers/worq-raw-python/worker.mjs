// Child process: the Python raw-stub worker (peer.py), with this process's stdio.
import { runPython } from "./run-python.mjs";

runPython("worker");
