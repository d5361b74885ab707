"""The switches that keep the libraries the service loads from reaching out on their own or drawing on its
output, set in the environment before those libraries are imported (each reads its switch when it loads).

onnxruntime's telemetry off, huggingface_hub's telemetry and Gradio's analytics off, and no progress bars with
JSON logs. A switch the user set explicitly is kept.

Design notes: docs/internals/runtime.md.
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
