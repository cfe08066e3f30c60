"""`delink serve` as a real process on 127.0.0.1, for tests/test_serve*.py and benchmarks/bench_serve.py.

The server is started with ``--port 0`` and found by the line it prints once it listens;
its output goes to a file the tests read (to check what it logs). ``stop`` ends it as an
orchestrator would (SIGTERM, then SIGKILL after a grace period), so nothing outlives a test.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, Optional

#: A cold numba cache compiles every kernel before the port opens: minutes on a busy 2-core machine.
START_TIMEOUT_S = 900.0
STOP_TIMEOUT_S = 60.0
LISTENING = re.compile(r" on (http://127\.0\.0\.1:\d+): ")


class ServeProcess:
    """``python -m spacy_delink serve INDEX --port 0 ARGS...``, up between ``start`` and ``stop``."""

    def __init__(self, index: Path, *args: str, log: Path, env: Optional[dict[str, str]] = None) -> None:
        self.command = [sys.executable, "-m", "spacy_delink", "serve", str(index), "--port", "0", *args]
        self.log = log
        self.env = {**os.environ, **(env or {})}
        self.process: Optional[subprocess.Popen[bytes]] = None
        self._log_handle: Optional[IO[bytes]] = None
        self.url = ""

    def start(self) -> "ServeProcess":
        self._log_handle = open(self.log, "wb")
        self.process = subprocess.Popen(self.command, stdout=self._log_handle, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = LISTENING.search(self.output())
            if found:
                self.url = found.group(1)
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"delink serve exited with status {self.process.returncode}:\n{self.output()[-3000:]}")
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"delink serve did not listen within {START_TIMEOUT_S:.0f} s:\n{self.output()[-3000:]}")

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stop(self) -> Optional[int]:
        """SIGTERM (uvicorn's graceful shutdown), SIGKILL if it has not exited in time; the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log_handle is not None:
            self._log_handle.close()
        return self.process.returncode

    def __enter__(self) -> "ServeProcess":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
