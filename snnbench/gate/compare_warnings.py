"""What makes two runs hard to compare, as warnings beside the verdict of
:func:`snnbench.gate.compare.compare`: differences between their manifests (GPU, driver, CPU and its
features, package versions, settings, a noisy machine) and in where their cases ran (hosts, GPU
models, cases side by side).
"""

from __future__ import annotations

from typing import Any

from snnbench.host.masking import mask_value
from snnbench.store.storage import Run


def manifest_warnings(base: dict[str, Any], cand: dict[str, Any]) -> list[str]:
    """Differences between two manifests that make timings hard to compare."""
    warnings: list[str] = []

    def gpus(m: dict[str, Any], field_name: str) -> list[str]:
        items = m.get("gpus") or []
        return [str(g.get(field_name)) for g in items if isinstance(g, dict)]

    for field_name, what in (("name", "GPU"), ("driver", "GPU driver"), ("cuda", "CUDA")):
        b, c = gpus(base, field_name), gpus(cand, field_name)
        if b != c:
            warnings.append(f"{what} differs: {', '.join(b) or 'none'} → {', '.join(c) or 'none'}")
    b_cpu = (base.get("cpu") or {}).get("model") if isinstance(base.get("cpu"), dict) else None
    c_cpu = (cand.get("cpu") or {}).get("model") if isinstance(cand.get("cpu"), dict) else None
    if b_cpu != c_cpu:
        warnings.append(f"CPU differs: {b_cpu or '?'} → {c_cpu or '?'}")
    # a VM may name AVX2 and AVX-512 hosts alike: the ISA tells them apart (where recorded)
    b_isa = (base.get("cpu") or {}).get("isa") if isinstance(base.get("cpu"), dict) else None
    c_isa = (cand.get("cpu") or {}).get("isa") if isinstance(cand.get("cpu"), dict) else None
    if isinstance(b_isa, list) and isinstance(c_isa, list) and b_isa != c_isa:
        warnings.append(f"CPU features differ: {' '.join(b_isa) or 'none'} → "
                        f"{' '.join(c_isa) or 'none'}")
    for name in ("python", "os"):
        if base.get(name) != cand.get(name):
            warnings.append(f"{name} differs: {base.get(name) or '?'} → {cand.get(name) or '?'}")
    b_pk, c_pk = base.get("packages") or {}, cand.get("packages") or {}
    if isinstance(b_pk, dict) and isinstance(c_pk, dict):
        for pkg in sorted(b_pk.keys() | c_pk.keys()):
            if b_pk.get(pkg) != c_pk.get(pkg):
                warnings.append(
                    f"{pkg} version differs: {b_pk.get(pkg) or 'absent'} → "
                    f"{c_pk.get(pkg) or 'absent'}"
                )
    b_set, c_set = base.get("settings") or {}, cand.get("settings") or {}
    if isinstance(b_set, dict) and isinstance(c_set, dict):
        for name in sorted(b_set.keys() | c_set.keys()):
            if b_set.get(name) != c_set.get(name):
                warnings.append(f"setting {name} differs: {b_set.get(name)} → {c_set.get(name)}")
    # older manifests have no env_vars: compared only when both runs recorded them
    b_env, c_env = base.get("env_vars"), cand.get("env_vars")
    if isinstance(b_env, dict) and isinstance(c_env, dict):
        for name in sorted(b_env.keys() | c_env.keys()):
            if b_env.get(name) != c_env.get(name):
                # a received manifest may hold a credential (an older snnbench's, someone
                # else's): compared as written, shown masked as a report shows it
                shown = [mask_value(name, env[name]) if name in env else "unset"
                         for env in (b_env, c_env)]
                warnings.append(f"environment variable {name} differs: "
                                f"{shown[0]} → {shown[1]}")
    # a run measured on a busy machine (snnbench.host.preflight): its times include the waiting
    for label, manifest in (("baseline", base), ("candidate", cand)):
        noise = manifest.get("noise")
        if isinstance(noise, dict) and noise.get("noisy"):
            reasons = [str(r) for r in noise.get("reasons") or []]
            more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
            warnings.append(f"the {label} run was noisy: {reasons[0] if reasons else '?'}{more}")
    return warnings


def _concurrency(run: Run) -> list[int]:
    """How many cases ran side by side, over the cases that ran (ok rows)."""
    ran = run.summary[run.summary["status"] == "ok"]
    return sorted({int(c) for c in ran["concurrency"] if c == c and int(c) > 0})


def _hosts_used(run: Run) -> list[str]:
    return sorted({h for h in run.summary["host"] if h})


def _gpu_models(run: Run, hosts: list[str]) -> list[str]:
    """GPU models of the machine records (manifest ``hosts``) of the hosts that ran cases."""
    records = run.manifest.get("hosts") or []
    return sorted({str(g.get("name")) for h in records if isinstance(h, dict)
                   and h.get("host") in hosts for g in (h.get("gpus") or [])
                   if isinstance(g, dict)})


def placement_warnings(base: Run, cand: Run) -> list[str]:
    """The two runs' cases ran on different hosts, or on different GPU models."""
    warnings: list[str] = []
    b_conc, c_conc = _concurrency(base), _concurrency(cand)
    if b_conc and c_conc and b_conc != c_conc:
        warnings.append(f"concurrency differs: {', '.join(map(str, b_conc))} → "
                        f"{', '.join(map(str, c_conc))} cases side by side (timings taken side "
                        "by side are not comparable with one case at a time)")
    b_hosts, c_hosts = _hosts_used(base), _hosts_used(cand)
    if b_hosts and c_hosts and b_hosts != c_hosts:
        warnings.append(f"hosts differ: {', '.join(b_hosts)} → {', '.join(c_hosts)}")
    # runs written before machine records have no "hosts": the manifest's GPU check covers them
    if "hosts" in base.manifest and "hosts" in cand.manifest:
        b_gpus, c_gpus = _gpu_models(base, b_hosts), _gpu_models(cand, c_hosts)
        if b_gpus != c_gpus:
            warnings.append(f"GPU models differ: {', '.join(b_gpus) or 'none'} → "
                            f"{', '.join(c_gpus) or 'none'}")
    return warnings
