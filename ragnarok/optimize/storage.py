"""The study's storage: Optuna's RDBStorage whose writes an interrupt never cuts in half.

SIGINT or SIGTERM parks the main thread wherever it is (:mod:`ragnarok.runtime.interrupt`). Parked inside a
write transaction, it would keep SQLite's write lock (a PostgreSQL row lock) until the process ends, and the
trial in flight could not be given back: it stayed RUNNING until its heartbeat went stale. Each write here is a
:func:`~ragnarok.runtime.interrupt.writing` block, so the main thread parks only between two writes. The
underscored methods are the ones Optuna's own cache (``_CachedStorage``) calls instead of the public ones.
"""

from __future__ import annotations

from typing import Any

from optuna.storages import RDBStorage

from ragnarok.runtime.interrupt import writing


class UncutStorage(RDBStorage):
    """:class:`optuna.storages.RDBStorage`, each write whole before an interrupt parks the main thread."""

    def create_new_study(self, *args: Any, **kwargs: Any) -> Any:
        with writing():
            return super().create_new_study(*args, **kwargs)

    def delete_study(self, *args: Any, **kwargs: Any) -> Any:
        with writing():
            return super().delete_study(*args, **kwargs)

    def set_study_user_attr(self, *args: Any, **kwargs: Any) -> Any:
        with writing():
            return super().set_study_user_attr(*args, **kwargs)

    def set_study_system_attr(self, *args: Any, **kwargs: Any) -> Any:
        with writing():
            return super().set_study_system_attr(*args, **kwargs)

    def _create_new_trial(self, *args: Any, **kwargs: Any) -> Any:
        with writing():
            return super()._create_new_trial(*args, **kwargs)

    def _set_trial_param(self, *args: Any, **kwargs: Any) -> Any:
        with writing():
            return super()._set_trial_param(*args, **kwargs)

    def set_trial_state_values(self, *args: Any, **kwargs: Any) -> Any:
        with writing():
            return super().set_trial_state_values(*args, **kwargs)

    def set_trial_intermediate_value(self, *args: Any, **kwargs: Any) -> Any:
        with writing():
            return super().set_trial_intermediate_value(*args, **kwargs)

    def set_trial_user_attr(self, *args: Any, **kwargs: Any) -> Any:
        with writing():
            return super().set_trial_user_attr(*args, **kwargs)

    def set_trial_system_attr(self, *args: Any, **kwargs: Any) -> Any:
        with writing():
            return super().set_trial_system_attr(*args, **kwargs)

    def record_heartbeat(self, *args: Any, **kwargs: Any) -> Any:
        with writing():
            return super().record_heartbeat(*args, **kwargs)
