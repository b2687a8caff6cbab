"""Equivalence of an adapter's build with its workload's reference, checked before anything is
timed.

What is compared, and the bars, belong to the workload's kind (:meth:`Workload.check
<snnbench.workload.Workload.check>`: for ``linear-lif``
:mod:`snnbench.workload.linear_lif.equivalence`, for ``nir-graph``
:mod:`snnbench.workload.graph.compare`); here an adapter's model is built and run once, and the
reference is computed once per network and kept for every case of a sweep.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from snnbench.adapter_shim import AnyAdapter, as_v2
from snnbench.records.fileio import WriteError, atomic_path
from snnbench.workload import Agreement, Workload, as_workload

#: the key of a kept reference file holding the text it was filed under
#: (:meth:`~snnbench.workload.Workload.reference_key`; named when it was the spec's JSON)
KEY_ARRAY = "spec_json"


def cached_reference(workload: Workload, folder: Path | None) -> Any:
    """``workload``'s reference for its case data, computed once per network and kept in
    ``folder`` (a sweep's, shared by its cases; None: computed here, kept nowhere).

    The file is data: arrays in an ``.npz`` read without pickle, holding the key it belongs
    to (:meth:`~snnbench.workload.Workload.reference_key`); one that is damaged, of another
    case or of other shapes is computed again and replaced. A kind that gives no arrays
    (:meth:`~snnbench.workload.Workload.reference_arrays`) is never kept. A worker calls
    this before it imports any library, so the reference every case of a network is checked
    against is the same, computed by NumPy alone.
    """
    key = workload.reference_key()
    path = None
    if folder is not None:
        path = folder / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.npz"
        stored = _read_reference(path, workload, key)
        if stored is not None:
            return stored
    result = workload.reference(workload.make_data())
    arrays = workload.reference_arrays(result) if path is not None else {}
    if path is not None and arrays:
        # a reference that cannot be kept (a full disk) is no failure: the next case computes
        with contextlib.suppress(OSError, WriteError):
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp, open(tmp, "wb") as handle:
                np.savez(handle, **{KEY_ARRAY: np.array(key), **arrays})
    return result


def _read_reference(path: Path, workload: Workload, key: str) -> Any | None:
    """The reference kept at ``path`` for ``workload``, or None (none, damaged or foreign)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data[KEY_ARRAY]) != key:
                return None
            return workload.reference_from_arrays(data)
    except Exception:  # missing, damaged, not an npz, a pickled object: computed again
        return None


def check_adapter(
    adapter: AnyAdapter, variant: str, workload: Workload | Any, device: str,
    reference: Any | None = None,
) -> tuple[Agreement, dict[str, Any]]:
    """Build ``adapter``'s model of ``workload`` (a bare ``NetworkSpec`` is read as
    ``linear-lif``) on copies of its data, run it once and compare with the reference
    (``reference``: computed already; None: computed here).

    Returns the agreement (:meth:`Workload.check <snnbench.workload.Workload.check>`) and
    the arrays of a dump.
    """
    case = as_workload(workload)
    v2 = as_v2(adapter)

    def run(data: Any) -> tuple[Any, Mapping[str, Any]]:
        # the plugin API v2 (a v1 adapter through the shim): gradients by parameter name
        model = v2.build(case, data, device, variant)
        try:
            model.zero_grad()
            handle = model.forward()
            model.backward(handle)
            model.synchronize()
            return np.asarray(model.spikes(handle), dtype=np.float32), model.gradients()
        finally:
            model.close()

    return case.check(run, reference)
