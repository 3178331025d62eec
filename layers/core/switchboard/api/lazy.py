"""`lazy_module` for route modules: see `switchboard.lazy`."""

from switchboard.lazy import LazyModule, lazy_module

__all__ = ["LazyModule", "lazy_module"]
