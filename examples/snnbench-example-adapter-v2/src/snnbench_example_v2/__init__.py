"""An snnbench adapter plugin written against the plugin API v2 (``snnbench.api``)."""
