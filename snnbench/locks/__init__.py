"""The image locks as package data: ``requirements-gpu.txt`` and ``requirements-cpu.txt``.

``make docker-lock`` writes them; docker/Dockerfile installs from them; ``snnbench.gpu_setup``
reads the GPU lock through :mod:`importlib.resources`, so it works from an installed wheel.
"""
