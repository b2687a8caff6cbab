"""The shipped sweep configurations, importable as ``snnbench.configs`` (TOML package data)."""
