"""Test plugin: fails while being imported."""

raise ImportError("this plugin cannot be imported (on purpose)")


def register(api):  # pragma: no cover - never reached
    pass
