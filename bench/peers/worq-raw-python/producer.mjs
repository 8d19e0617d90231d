// Child process: the Python raw-stub producer (peer.py), with this process's stdio.
import { runPython } from "./run-python.mjs";

runPython("producer");
