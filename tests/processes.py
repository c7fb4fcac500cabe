"""Stopping the servers the tests start in subprocesses."""

from __future__ import annotations

import subprocess


def stop(process: subprocess.Popen | None, timeout: float = 10.0) -> None:
    """Terminate ``process`` if it runs, and kill it if it has not exited after ``timeout`` seconds."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
