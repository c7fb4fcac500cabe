"""A real ``mlflow server`` for the tracking tests (the full ``mlflow`` package of the test extra):
started on a free port of 127.0.0.1 with its runs and registry in SQLite and its artifacts in a
temporary folder, MLflow's basic-auth app in front (so that a refused credential is a real 401),
stopped at the end. Nothing stands in for the real server.

``with MlflowServer(tmp_path) as s: s.uri``; ``s.environ()`` gives the client its credentials
(MLflow's own variables); ``s.client()`` an ``MlflowClient`` signed in; ``s.stop()``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.processes import stop
from tests.redis_server import free_port

USER = "admin"
#: the admin's password the auth app is started with (a throwaway of these tests)
PASSWORD = "llmbias-test-password-1"


class MlflowServer:
    """An ``mlflow server --app-name basic-auth`` process on 127.0.0.1."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "mlflow.log"

    def environ(self, password: str = PASSWORD) -> dict[str, str]:
        """MLflow's client variables for this server, signed in as the admin (or with ``password``)."""
        return {"MLFLOW_TRACKING_URI": self.uri, "MLFLOW_TRACKING_USERNAME": USER, "MLFLOW_TRACKING_PASSWORD": password}

    def start(self, timeout: float = 180.0) -> MlflowServer:
        args = [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{self.directory / 'mlflow.db'}",
            "--default-artifact-root",
            str(self.directory / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
            "--app-name",
            "basic-auth",
        ]
        env = {
            **os.environ,
            "MLFLOW_AUTH_ADMIN_PASSWORD": PASSWORD,
            "MLFLOW_AUTH_CONFIG_PATH": str(self._auth_config()),
            "MLFLOW_FLASK_SERVER_SECRET_KEY": "llmbias-tests-csrf-key",
            # nothing leaves the machine: no usage telemetry, no price list fetched by litellm
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "DO_NOT_TRACK": "true",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            # no job runner: its seven consumer processes are for MLflow's GenAI jobs, not runs
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        }
        for name in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
            env.pop(name, None)
        handle = self.log.open("ab")
        # a session of its own: the server's workers are children, stopped (or killed) with it as a group
        self.process = subprocess.Popen(
            args, cwd=self.directory, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
        handle.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"mlflow server did not answer on port {self.port}: {self.log.read_text()[-2000:]}")

    def _auth_config(self) -> Path:
        path = self.directory / "basic_auth.ini"
        path.write_text(
            "[mlflow]\ndefault_permission = READ\n"
            f"database_uri = sqlite:///{self.directory / 'basic_auth.db'}\n"
            f"admin_username = {USER}\nadmin_password = {PASSWORD}\n"
            "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
            # a password checked once, not hashed again on every request (seconds each on a busy machine)
            "auth_cache_ttl_seconds = 600\n",
            encoding="utf-8",
        )
        return path

    def client(self):
        from mlflow.tracking import MlflowClient

        os.environ.update(self.environ())  # MLflow's client reads its credentials from the environment
        return MlflowClient(tracking_uri=self.uri, registry_uri=self.uri)

    def kill(self) -> None:
        """Kill the server and its workers at once (SIGKILL to its process group), as a crash would."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            stop(self.process)
            self.kill()  # whatever of the group outlived its parent
        self.process = None

    def __enter__(self) -> MlflowServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
