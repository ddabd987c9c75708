"""A backend's name as a typed value: "KIND:DEVICE:DTYPE", optionally "@ENV" (the backend run by
another Python environment's interpreter, fuzzer/running/envs.py); a plugin's backend is a bare name.

Names enter as text (a CLI option, a corpus row, a case file, a plugin) and are parsed here once;
`str()` gives the text back byte for byte, so what the corpus stores never changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class BackendName:
    """The parts of a backend name. `device` and `dtype` are None where the text has no such part
    ("torch-eager", a plugin's "my-kernels"); `env` is None without "@ENV"."""

    kind: str
    device: str | None = None
    dtype: str | None = None
    env: str | None = None

    @classmethod
    def parse(cls, text: str) -> BackendName:
        """Any text, split at the first "@" and then at ":"; more than three parts are no built-in's
        name, so a bare one (never refused: which names exist is fuzzer.backends.get_backend's question)."""
        base, at, env = text.partition("@")
        parts = base.split(":")
        return cls(*(parts if len(parts) <= 3 else [base]), env=env if at else None)

    def __str__(self) -> str:
        parts = [self.kind] + [part for part in (self.device, self.dtype) if part is not None]
        return ":".join(parts) + (f"@{self.env}" if self.env is not None else "")

    @property
    def full(self) -> bool:
        """A built-in backend's whole name, KIND:DEVICE:DTYPE (a plugin's backend is named by itself)."""
        return self.device is not None and self.dtype is not None

    @property
    def here(self) -> BackendName:
        """The same backend in this Python environment (the name without "@ENV")."""
        return replace(self, env=None)

    def covers(self, other: BackendName) -> bool:
        """Does this name, perhaps short ("jax-jit", "jax-jit:cpu"), name `other` in the same environment?"""
        return (self.env == other.env and self.kind == other.kind
                and self.device in (None, other.device) and self.dtype in (None, other.dtype))
