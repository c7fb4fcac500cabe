"""What a run logs to an experiment tracker, and the trackers that take it.

:mod:`~pytest_llmbias.report.tracking.run_log` turns the run's JSON document (the data every
report is made from) into a backend-neutral :class:`~pytest_llmbias.report.tracking.run_log.RunLog`:
params, metrics, tags, artifacts and the registry's verdict; the names it gives are in
:mod:`~pytest_llmbias.report.tracking.names`. A backend is one module that maps a RunLog onto its
tracker's client: :mod:`~pytest_llmbias.report.tracking.mlflow_backend` (MLflow runs, model-version
tags and registry aliases). Standard library only, except inside a backend's functions.
"""
