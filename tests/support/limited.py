"""Run the real ``promptls`` command line as a subprocess under time and memory limits.

Used by the reliability suite (``tests/reliability``) and the on-demand fuzz run
(``tests/fuzz``): each run gets an address-space limit (``RLIMIT_AS``) and a wall-clock
deadline after which its whole process group is killed; its peak resident memory is
read from ``wait4`` (it includes the worker and counting children it waited for).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 4 * 1024**3  # address space; tiktoken's thread pools reserve a lot of it
TIMEOUT_S = 90.0


@dataclass(frozen=True, slots=True)
class Run:
    args: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes
    seconds: float
    max_rss_mb: float
    timed_out: bool

    @property
    def out(self) -> str:
        return self.stdout.decode("utf-8")  # raises on invalid UTF-8: callers check that

    @property
    def err(self) -> str:
        return self.stderr.decode("utf-8")

    def problems(self) -> list[str]:
        """What no run may ever show: a hang, a traceback, a crash, invalid UTF-8."""
        res = []
        if self.timed_out:
            res.append(f"hang: killed after {self.seconds:.0f} s")
        for name, data in (("stdout", self.stdout), ("stderr", self.stderr)):
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                res.append(f"invalid UTF-8 on {name}: {exc}")
                continue
            if "Traceback (most recent call last)" in text:
                res.append(f"traceback on {name}: {text[-800:]}")
        if self.returncode < 0:
            res.append(f"killed by signal {-self.returncode}")
        elif self.returncode not in (0, 1, 2):
            res.append(f"exit code {self.returncode}")
        return res


def _limits(memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_python(
    code_or_args: Sequence[str],
    *,
    cwd: Path,
    timeout: float = TIMEOUT_S,
    memory: int = MEMORY_LIMIT,
    env: dict[str, str] | None = None,
) -> Run:
    """Run ``python <args>`` (e.g. ``-m server.cli lint .``) under the limits."""
    args = (sys.executable, *code_or_args)
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", **(env or {})}
    start = time.monotonic()
    proc = subprocess.Popen(
        args,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full_env,
        start_new_session=True,
        preexec_fn=lambda: _limits(memory),
    )
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}

    def pump(stream: object, key: str) -> None:
        for block in iter(lambda: stream.read(1 << 16), b""):  # type: ignore[attr-defined]
            chunks[key].append(block)

    readers = [
        threading.Thread(target=pump, args=(proc.stdout, "out"), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, "err"), daemon=True),
    ]
    for t in readers:
        t.start()
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    seconds = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if not timed_out.is_set():  # children left behind would hold the pipes open
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    for t in readers:
        t.join(10)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    proc.stderr.close()
    return Run(
        args=tuple(args),
        returncode=proc.returncode,
        stdout=b"".join(chunks["out"]),
        stderr=b"".join(chunks["err"]),
        seconds=seconds,
        max_rss_mb=usage.ru_maxrss / 1024,
        timed_out=timed_out.is_set(),
    )


def promptls(*args: str, cwd: Path, **kw: object) -> Run:
    """Run ``promptls ARGS`` (``python -m server.cli``) under the limits."""
    return run_python(["-m", "server.cli", *args], cwd=cwd, **kw)  # type: ignore[arg-type]
