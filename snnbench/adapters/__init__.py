"""Adapters shipped with snnbench, one module per library (imported as ``snnbench.adapters``).

Every module imports its benchmarked library lazily, inside methods, so importing this package
never imports torch, JAX or any SNN library.
"""
