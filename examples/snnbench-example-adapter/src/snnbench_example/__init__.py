"""An example third-party snnbench adapter package."""
