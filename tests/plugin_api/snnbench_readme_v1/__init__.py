"""The README example adapter (plugin API v1), copied verbatim: it must verify through the shim."""
