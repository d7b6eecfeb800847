"""Training algorithms and policies (installed as ``terrazero_env.agents``); the only package that
imports torch."""

__all__: list[str] = []
