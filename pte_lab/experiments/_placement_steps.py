"""The steps of the device-placement experiment, run in a fresh process of any executorch.

Standalone on purpose: it imports neither pte_lab nor anything but torch,
executorch and the standard library, so it runs under another interpreter
(e.g. executorch 1.4.1 in its own venv). Usage::

    python _placement_steps.py '{"pte": PATH, "reference": PATH, "device": "cuda:0", "device_index": 0,
                                 "helper": PATH-or-null}'

``reference`` is a ``torch.save`` file ``{"inputs": [x, y], "expect": {method:
tensor}}`` that the caller computed eagerly (``pte_lab.examples.device_reference``).
Prints one line ``RESULT <json>``. Each step records the device bytes taken
(positive) or returned (negative), host bytes, seconds, whether outputs matched
the reference (checked after the step's figures are read, so that torch's own
work in the check is not counted), and any error verbatim. Host bytes are exact where pte_lab's
allocation counter is preloaded (every malloc and anonymous mapping; the
emulated device's bytes are not among them), glibc's statistics otherwise.
"""

import ctypes
import importlib.metadata as md
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path


def _mallinfo():
    """``pte_lab/mallinfo.py`` (glibc's ``mallinfo2``: its one home, standard library only), loaded by its path:
    this script imports no pte_lab package."""
    spec = importlib.util.spec_from_file_location("pte_lab_mallinfo", Path(__file__).resolve().parents[1] / "mallinfo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(args):
    import torch
    import executorch
    from executorch.runtime import Runtime

    try:
        et_version = md.version("executorch")
    except Exception:  # noqa: BLE001 - no distribution metadata (a source build): the module's own version
        et_version = getattr(executorch, "__version__", "unknown")
    rt = Runtime.get()
    # the caller parsed the device (pte_lab.devices.parse_device): its index comes as a number
    dev_index = int(args.get("device_index", 0))
    helper = None
    measured_by = "none"
    if args.get("helper"):
        import executorch.extension.pybindings.portable_lib  # load the registry first

        helper = ctypes.CDLL(args["helper"])
        helper.pte_lab_outstanding.restype = ctypes.c_uint64
        helper.pte_lab_event_count.restype = ctypes.c_uint64
        rc = helper.pte_lab_register(1)
        measured_by = "emulated device ledger (exact, host memory)" if rc in (0, 1) else "none"
    elif torch.cuda.is_available():
        measured_by = "torch.cuda.mem_get_info"
    mallinfo = _mallinfo()
    glibc_heap = mallinfo.handed_out() is not None
    counter = getattr(ctypes.CDLL(None), "pte_lab_counter_host_bytes", None)  # preloaded by the caller, if at all
    if counter is not None:
        counter.restype = ctypes.c_int64
    host_measured_by = ("exact (allocation counter)" if counter is not None
                        else mallinfo.HOW if glibc_heap else "none")

    def device_bytes():
        if helper is not None:
            return int(helper.pte_lab_outstanding(1))
        if measured_by == "torch.cuda.mem_get_info":
            torch.cuda.synchronize(dev_index)
            return -int(torch.cuda.mem_get_info(dev_index)[0])
        return None

    def host_bytes():
        if counter is not None:
            return int(counter())
        return mallinfo.handed_out()

    def events():
        return int(helper.pte_lab_event_count()) if helper is not None else None

    steps = []
    state = {}
    reference = torch.load(args["reference"], weights_only=True)
    inputs, expect = list(reference["inputs"]), reference["expect"]

    def step(name, fn, check=None):
        d0, h0, e0 = device_bytes(), host_bytes(), events()
        t = time.perf_counter()
        rec = {"step": name, "error": None, "correct": None}
        out = None
        try:
            out = fn()
        except Exception as exc:  # noqa: BLE001 - recorded verbatim
            rec["error"] = f"{type(exc).__name__}: {exc}"
        rec["seconds"] = time.perf_counter() - t
        d1, h1, e1 = device_bytes(), host_bytes(), events()  # the step's output still held, its check not begun
        rec["device_bytes"] = None if d0 is None or d1 is None else d1 - d0
        rec["host_bytes"] = None if h0 is None or h1 is None else h1 - h0
        rec["device_events"] = None if e0 is None else e1 - e0
        if check is not None and rec["error"] is None:  # checked outside the measurement: torch's own work
            try:
                rec["correct"] = bool(check(out))
            except Exception as exc:  # noqa: BLE001 - recorded verbatim
                rec["error"] = f"{type(exc).__name__}: {exc}"
        steps.append(rec)

    def run(method):
        # inputs are host tensors: the program itself copies them to the device
        return lambda: state["methods"][method].execute(inputs)[0]

    def close(method):
        return lambda out: torch.allclose(out.cpu(), expect[method], atol=1e-4, rtol=1e-4)

    def load_program():
        state["program"] = rt.load_program(args["pte"])
        state["methods"] = {}

    def load_method(name):
        def go():
            state["methods"][name] = state["program"].load_method(name)
        return go

    step("load_program", load_program)
    step("load_method forward", load_method("forward"))
    step("load_method forward2", load_method("forward2"))
    if "forward2" in state.get("methods", {}):
        step("execute forward2", run("forward2"), close("forward2"))
    if "forward" in state.get("methods", {}):
        step("execute forward", run("forward"), close("forward"))
    if "forward2" in state.get("methods", {}):
        step("execute forward2 again", run("forward2"), close("forward2"))

    def release():
        state.clear()

    step("release", release)
    return {"executorch_version": et_version, "torch_version": torch.__version__,
            "measured_by": measured_by, "host_measured_by": host_measured_by, "cuda_available": bool(torch.cuda.is_available()), "steps": steps}


if __name__ == "__main__":
    try:
        result = main(json.loads(sys.argv[1]))
    except Exception:  # noqa: BLE001 - a child process: any failure goes back to the parent as its traceback
        result = {"fatal": traceback.format_exc()}
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
