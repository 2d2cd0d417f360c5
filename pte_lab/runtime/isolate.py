"""Run the ExecuTorch runtime in a worker process, so a native crash cannot take the caller down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading

from ..errors import PteLabError, RuntimeCrashedError
from ..quiet import NativeLog, quiet
from . import native
from ._protocol import read_msg, write_msg
from .engine import Engine


class RemoteError(PteLabError):
    """An exception raised inside the worker (type name and message kept)."""

    def __init__(self, type_name: str, message: str):
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message


def _counter_preload() -> str | None:
    """The allocation counter's path, or None where it cannot be built (no compiler, no glibc)."""
    if not sys.platform.startswith("linux"):
        return None

    try:
        return str(native.counter_path())
    except PteLabError:
        return None


# The engine's operations whose first argument is a method name (named in a crash report).
_METHOD_OPS = ("load_method", "execute", "meta")


class Worker:
    """A worker process hosting an :class:`~pte_lab.runtime.engine.Engine`.

    ``worker.call(op, *args)`` runs ``Engine.op`` there (``native``: a
    :class:`~pte_lab.runtime.native_engine.NativeEngine`, which runs the sizing runner without importing
    ExecuTorch's Python package). If the process dies,
    :class:`RuntimeCrashedError` carries the signal and the last lines of its
    stderr; the worker is then gone and every later call raises the same.
    """

    def __init__(self, *engine_args, count: bool = True, native: bool = False, **engine_kwargs):
        self._stderr = tempfile.TemporaryFile()
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.counted = False
        if count:  # every allocation of the worker counted exactly (glibc only; else approximate)
            preload = _counter_preload()
            if preload:
                env["LD_PRELOAD"] = " ".join(filter(None, [preload, env.get("LD_PRELOAD")]))
                self.counted = True
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "pte_lab.runtime.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        self._lock = threading.Lock()
        self._dead: RuntimeCrashedError | None = None
        try:
            self.call("init_native" if native else "init", *engine_args, **engine_kwargs)
        except BaseException:
            self.close()  # a worker that could not start is not left running
            raise

    @property
    def alive(self) -> bool:
        return self._dead is None and self._proc.poll() is None

    def native_tail(self, n: int = 20) -> list[str]:
        """The worker's last stderr lines (ExecuTorch's native output)."""
        return self._stderr_tail(n)

    def _stderr_tail(self, n: int = 20) -> list[str]:
        self._stderr.seek(0)
        lines = self._stderr.read().decode("utf-8", errors="replace").splitlines()
        return [ln for ln in lines if ln.strip()][-n:]

    def _crashed(self, what: str) -> RuntimeCrashedError:
        code = self._proc.wait(timeout=30)
        sig = signal.Signals(-code).name if code < 0 else None
        tail = self._stderr_tail()
        how = f"was killed by {sig}" if sig else f"exited with status {code}"
        msg = f"the isolated ExecuTorch worker {how} during {what}; your session is unharmed."
        if tail:
            msg += " Last stderr lines:\n  " + "\n  ".join(tail[-8:])
        return RuntimeCrashedError(msg, signal=sig, exit_code=code if code >= 0 else None, stderr=tail)

    def call(self, op: str, *args, **kwargs):
        with self._lock:
            if self._dead is not None:
                raise self._dead
            try:
                write_msg(self._proc.stdin, (op, args, kwargs))
                reply = read_msg(self._proc.stdout)
            except (BrokenPipeError, OSError):
                reply = None
            if reply is None:
                what = f"{op!r} of method {args[0]!r}" if op in _METHOD_OPS and args else repr(op)
                self._dead = self._crashed(what)
                raise self._dead
        if reply[0] == "ok":
            return reply[1]
        raise RemoteError(reply[1], reply[2])

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                with self._lock:
                    write_msg(self._proc.stdin, ("exit", (), {}))
                    read_msg(self._proc.stdout)
            except (BrokenPipeError, OSError):
                pass
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self._stderr.close()

    def __del__(self):  # pragma: no cover - best effort
        try:
            if self._proc.poll() is None:
                self._proc.kill()
        except Exception:  # noqa: BLE001 - a finalizer never raises (the process may be gone, or half-made)
            pass


class LocalEngine:
    """The same ``call`` interface over an in-process Engine; ExecuTorch's native output is kept, not shown."""

    def __init__(self, *engine_args, **engine_kwargs):
        self.native_log = NativeLog()
        self._quiet = quiet
        with quiet(self.native_log):
            self._engine = Engine(*engine_args, **engine_kwargs)
        self.alive = True

    def call(self, op: str, *args, **kwargs):
        with self._quiet(self.native_log):
            return getattr(self._engine, op)(*args, **kwargs)

    def native_tail(self, n: int = 20) -> list[str]:
        return self.native_log.tail(n)

    def close(self) -> None:
        self._engine = None
