"""The context-manager and finaliser protocol every handle-owning class of zeusc shares."""
from __future__ import annotations


class Closeable:
    """``with`` support and a finaliser around the subclass's idempotent ``close()``."""

    def close(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
