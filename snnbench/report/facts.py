"""Table models of ``list`` and ``env``: this machine and its adapters, no run folder.

Apart from :mod:`snnbench.report.views` because those views rank results (SciPy, pandas: about
1.7 s of imports on a 2-core machine), which ``list`` answered from its probe cache must not
wait for (issue 38: a warm ``list`` in about a second).
"""

from __future__ import annotations

from typing import Any

from snnbench.render.model import Table


def adapters_table(results: list[dict[str, Any]], version: str) -> Table:
    """``snnbench list``: adapter, variants, the workload kinds it builds (in any variant),
    library, version and status, one row a probe."""
    table = Table(["adapter", "variants", "workloads", "library", "version", "status"], [],
                  title=f"snnbench {version}: adapters")
    for r in results:
        status = ("available" if r.get("available")
                  else f"unavailable: {r.get('reason', '')}")
        not_here = r.get("variants_unavailable") or {}
        if r.get("available") and not_here:
            status += "; not here: " + "; ".join(f"{v}: {why}" for v, why in not_here.items())
        variants = ", ".join(str(v) for v in r.get("variants") or [])
        kinds = dict.fromkeys(kind for caps in (r.get("capabilities") or {}).values()
                              for kind in (caps.get("workloads") or {}))
        table.add_row([str(r["name"]), variants, ", ".join(kinds), str(r.get("library") or ""),
                       str(r.get("version") or ""), status],
                      style="" if r.get("available") else "red")
    return table


def environment_facts_table(data: dict[str, Any]) -> Table:
    """``snnbench env``: one row per fact of
    :func:`snnbench.host.environment.collect_environment`."""
    table = Table(["key", "value"], [], title="environment", show_header=False)
    for key, value in data.items():
        if key == "packages":
            for pkg, ver in value.items():
                table.add_row([f"package {pkg}", ver or "not installed"])
        elif key == "gpus":
            if not value:
                table.add_row(["gpu", "absent (no NVIDIA driver/GPU seen by NVML)"])
            for gpu in value:
                table.add_row([f"gpu {gpu['index']}",
                               f"{gpu['name']}, driver {gpu['driver']}, CUDA {gpu['cuda']}, "
                               f"{gpu['memory_bytes'] / 2**30:.1f} GiB"])
        else:
            for name, text in _facts(key, value):
                table.add_row([name, text])
    return table


def _facts(key: str, value: Any) -> list[tuple[str, str]]:
    """(label, text) rows for one fact: a mapping becomes a row per entry (``cpu isa``,
    ``env_vars OPENBLAS_CORETYPE``), a list one comma-joined cell, None "none", a bool
    yes/no; never JSON inside a cell."""
    if isinstance(value, dict):
        if not value:
            return [(key, "none")]
        return [row for sub, item in value.items() for row in _facts(f"{key} {sub}", item)]
    if isinstance(value, list | tuple):
        return [(key, ", ".join(str(v) for v in value) or "none")]
    if value is None:
        return [(key, "none")]
    if isinstance(value, bool):
        return [(key, "yes" if value else "no")]
    return [(key, str(value))]
