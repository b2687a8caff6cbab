"""snnbench: honest benchmarks of spiking neural network training libraries."""

from __future__ import annotations

__version__ = "0.1.0"
