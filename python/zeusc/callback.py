"""The training-loop callback interface (zeus.callback of the original)."""
from __future__ import annotations


class Callback:
    """Hooks a training loop calls; each does nothing unless overridden."""

    def on_train_begin(self) -> None:
        """Called at the beginning of training."""

    def on_train_end(self) -> None:
        """Called at the end of training."""

    def on_epoch_begin(self) -> None:
        """Called at the beginning of an epoch."""

    def on_epoch_end(self) -> None:
        """Called at the end of an epoch."""

    def on_step_begin(self) -> None:
        """Called at the beginning of a step."""

    def on_step_end(self) -> None:
        """Called at the end of a step."""

    def on_evaluate(self, metric: float) -> None:
        """Called after evaluating the model."""

    def on_instruction_begin(self, name: str) -> None:
        """Called at the beginning of a pipeline instruction (forward, backward)."""

    def on_instruction_end(self, name: str) -> None:
        """Called at the end of a pipeline instruction."""


__all__ = ["Callback"]
