"""Bundled data: maps (``maps/*.tzb`` and the YAML specs that regenerate them) and presets."""
