"""``terrazero eval RUN --suite NAME`` lives in the torch-free :mod:`terrazero_env.evaluation.suite_eval`;
its entry stays importable from here."""

from __future__ import annotations

from terrazero_env.evaluation.suite_eval import evaluate_suite

__all__ = ["evaluate_suite"]
