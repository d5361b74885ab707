"""The switches that keep the libraries the service loads from reaching out on their own or drawing on its
output, set in the environment before those libraries are imported (each reads its switch when it loads).

* onnxruntime (the ONNX encoders) sends telemetry: seconds after ``import onnxruntime`` its threads look up
  ``mobile.events.data.microsoft.com`` (DNS queries to the resolver; measured with ``strace -f -e
  trace=network``, tests/test_serve_output.py). ``ORT_DISABLE_TELEMETRY=1`` turns it off; it must be set
  before the import (``onnxruntime.disable_telemetry_events()`` after it does not stop the lookups).
* huggingface_hub (and the transformers, sentence-transformers and Gradio above it): no telemetry, and Gradio
  no analytics. Measured, neither connects anywhere while ``ragnarok serve`` starts and encodes with either
  switch on; they are set for the paths that would (a hub download allowed by ``allow_downloads``, Gradio's
  own launch).
* With JSON logs, no progress bars from huggingface_hub and transformers (they would be lines of ``\\r``
  refreshes): :func:`no_progress_bars`.

A switch the user set explicitly is kept (``ORT_DISABLE_TELEMETRY=0`` re-enables onnxruntime's telemetry).
"""

from __future__ import annotations

import os

#: Environment switches that turn off what a library would send without being asked.
NO_TELEMETRY = {
    "ORT_DISABLE_TELEMETRY": "1",  # onnxruntime
    "HF_HUB_DISABLE_TELEMETRY": "1",  # huggingface_hub's usage reports
    "GRADIO_ANALYTICS_ENABLED": "False",  # Gradio's analytics and version check
}
NO_PROGRESS_BARS = {"HF_HUB_DISABLE_PROGRESS_BARS": "1"}  # huggingface_hub's and transformers' tqdm bars


def no_telemetry() -> None:
    """Set :data:`NO_TELEMETRY` in this process's environment (and its children's) unless already set."""
    for name, value in NO_TELEMETRY.items():
        os.environ.setdefault(name, value)


def no_progress_bars() -> None:
    for name, value in NO_PROGRESS_BARS.items():
        os.environ.setdefault(name, value)
