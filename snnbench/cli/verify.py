"""``snnbench verify``: every adapter's spikes and gradients checked against the reference."""

from __future__ import annotations

import signal
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from snnbench.cli import output
from snnbench.cli.options import choice, finite, ints, names, refuse_network_flags
from snnbench.cli.output import fail
from snnbench.sweep.config import RunConfig, build_config, check_variables
from snnbench.sweep.verify_request import DETACH_CHOICES, DEVICES as VERIFY_DEVICES, VerifyRequest
from snnbench.workload.linear_lif.neuron import RESET_MODES

#: ``verify``'s option defaults are the request's own
_VERIFY = VerifyRequest()


def verify(
    ctx: typer.Context,
    adapters: Annotated[str, typer.Option(
        help="Comma list of adapters (name, name:variant, name@VERSION for that library version "
        "in its own environment), or 'all'.")] = ",".join(_VERIFY.adapters),
    config: Annotated[str | None, typer.Option(
        "--config", "-c", help="Check the networks this sweep (a TOML file, or a shipped one "
        "by name) runs, as 'run' checks each before timing: its adapters, environments and "
        "cases, T cut to its verify_time_steps; the options given with it override its "
        "values.")] = None,
    network: Annotated[str | None, typer.Option(
        "--network", help="A NIR graph to check instead of the Linear+LIF network: a .nir "
        "file, or example:NAME for a shipped example; --neurons, --layers, --bias and "
        "--precision do not apply (docs/nir.md).")] = None,
    dt: Annotated[float | None, typer.Option(
        help="A graph's time step in seconds (a NIR graph states none), e.g. 1e-3.")] = None,
    reset: Annotated[str, typer.Option(help="subtract, zero or both.")] = "both",
    neurons: Annotated[str, typer.Option(help="Comma list of n.")] = ",".join(
        map(str, _VERIFY.neurons)),
    steps: Annotated[int, typer.Option(help="Time steps T.")] = _VERIFY.time_steps,
    batch_size: Annotated[int, typer.Option(help="Batch size B.")] = _VERIFY.batch_size,
    dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16.")] = _VERIFY.dtype,
    precision: Annotated[str, typer.Option(
        help="Matmul precision: strict, tf32, amp-bf16 or amp-fp16 (automatic mixed "
        "precision, checked against the reference's autocast emulation).")
    ] = _VERIFY.matmul_precision,
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = _VERIFY.device,
    detach_reset: Annotated[str, typer.Option(
        help="true, false, both, or auto (the spec default where supported, else the "
        "adapter's rule).")] = _VERIFY.detach_reset,
    surrogate: Annotated[str, typer.Option(
        help="fast_sigmoid, atan or sigmoid.")] = _VERIFY.surrogate,
    surrogate_slope: Annotated[float, typer.Option(
        help="The surrogate's slope.")] = _VERIFY.surrogate_slope,
    layers: Annotated[int, typer.Option(
        help="Linear+LIF layers (layer l+1 takes layer l's spikes).")] = _VERIFY.layers,
    bias: Annotated[bool, typer.Option("--bias/--no-bias", help="Linear layers with a bias.")
                    ] = _VERIFY.bias,
    input_kind: Annotated[str, typer.Option(
        help="gaussian (current) or bernoulli (spikes).")] = _VERIFY.input_kind,
    dump: Annotated[Path | None, typer.Option(
        help="Write <adapter>-<variant>-<reset>.npz per check (largest n) into this folder "
        "(new, empty, or holding earlier dumps only).",
    )] = None,
    timeout: Annotated[float, typer.Option(help="Seconds per check.")] = _VERIFY.timeout_s,
    wheelhouse: Annotated[str, typer.Option(
        help="Folder of wheels: build library environments (adapter@VERSION) from it alone, "
        "offline.")] = _VERIFY.wheelhouse,
) -> None:
    """Check every adapter's spikes and gradients against the reference.

    The defaults check the spec's own network (reset subtract and zero, reset detached,
    fast_sigmoid slope 25, T=50, B=4), not the one a plain 'snnbench run' times (the default
    config: reset zero, not detached, sigmoid slope 4, B=16); '--config default' checks
    exactly those.

    --adapters spikingjelly@0.0.0.0.14 checks that library version in its own environment.
    Exit 0 when every check that ran matched, 1 on a mismatch or a broken check, 2 when
    nothing could be checked at all (every check skipped or unavailable): no evidence is not
    a pass.
    """
    from snnbench.store.storage import claim_folder, written_by_snnbench
    from snnbench.sweep.verify_cmd import run_verification

    def given(option: str) -> bool:
        source = ctx.get_parameter_source(option)
        return source is not None and source.name != "DEFAULT"

    if network is not None:
        refuse_network_flags({flag: True if given(option) else None for flag, option in (
            ("--neurons", "neurons"), ("--layers", "layers"), ("--bias/--no-bias", "bias"),
            ("--precision", "precision"))})
    if dt is not None:
        finite(dt, "--dt", low=0)
        if network is None and config is None:
            fail("--dt is a graph's time step: give it with --network G.nir (or --config)")
    resets = list(RESET_MODES) if reset == "both" else names(reset, "--reset")
    choice("--reset", reset, resets, (*RESET_MODES, "both"))
    choice("--device", device, [device], VERIFY_DEVICES)
    choice("--detach-reset", detach_reset, [detach_reset], tuple(DETACH_CHOICES))
    request = VerifyRequest(
        adapters=tuple(names(adapters, "--adapters")), resets=tuple(resets),
        neurons=tuple(ints(neurons, "--neurons")), time_steps=steps,
        batch_size=batch_size, dtype=dtype, matmul_precision=precision, device=device,
        dump_dir=dump,
        detach_reset=detach_reset, surrogate=surrogate, surrogate_slope=surrogate_slope,
        timeout_s=timeout, wheelhouse=wheelhouse, layers=layers, bias=bias,
        input_kind=input_kind, graph=network or "", dt=dt,
    )
    # the same validation a run applies, before any folder is made or process started (a
    # graph's file is read here: every defect of it one line)
    fields = request.network()
    RunConfig(network=fields).with_overrides(
        {"timeout_s": timeout}, {} if network is not None else {"neurons": request.neurons})
    if config is not None:
        request = replace(request, config=_verify_config(ctx, config, request, fields))
    check_variables()
    if dump is not None:
        # earlier dumps (in the folder's ledger, unchanged) may be refreshed; anything else in
        # the folder, a user's own .npz included, is never overwritten
        claim_folder(dump, "--dump", written_by_snnbench)
    from snnbench.host.lifeline import terminate_as_interrupt, termination_signal

    try:
        # SIGTERM unwinds like Ctrl-C: the running worker is killed, the scratch folder goes
        with terminate_as_interrupt():
            rows = run_verification(
                request, console=output.err_console,
                notify=lambda line: output.err_console.print(escape(line), highlight=False))
    except KeyboardInterrupt as exc:
        signum = termination_signal(exc)
        what = f"stopped by {signal.Signals(signum).name}" if signum else "interrupted"
        output.err_console.print(f"verify {what}: no verdict; its scratch folder was removed",
                                 highlight=False, soft_wrap=True)
        raise typer.Exit(128 + signum if signum else 130) from None
    from snnbench.render.terminal import Look, print_document
    from snnbench.report.views import verify_document, verify_headers, verify_rows
    from snnbench.sweep.verify_cmd import exit_code

    # the columns of the cases' kind (one kind per verification: its config's)
    headers = verify_headers(type(rows[0].workload) if rows else None)
    status_col = headers.index("status")
    doc, checked = verify_document(verify_rows(rows), precision, headers)
    print_document(output.console, doc, Look(compact=True, no_wrap=True,
                                             collapse_padding=True, tight=True))
    if not checked:
        fail(f"nothing was verified: {len(rows)} of {len(rows)} checks skipped or unavailable "
             "(reasons above); no evidence is not a pass")
    code = exit_code(rows)
    passed = sum(1 for r in checked if r[status_col] == "ok")
    unchecked = (f"; {len(rows) - len(checked)} not checked" if len(rows) > len(checked)
                 else "")
    output.console.print(f"{'OK' if code == 0 else 'FAILED'}: {passed} of {len(checked)} checks "
                         f"matched the reference{unchecked}", highlight=False)
    raise typer.Exit(code)



def _verify_config(ctx: typer.Context, name: str, request: Any,
                   network: dict[str, Any]) -> RunConfig:
    """The sweep ``verify --config`` checks: the config, with the options given on the command
    line (not their defaults) overriding its values as they would on ``run``."""
    def given(option: str) -> bool:
        source = ctx.get_parameter_source(option)
        return source is not None and source.name != "DEFAULT"

    run_overrides: dict[str, Any] = {}
    for option, key, value in (("adapters", "adapters", request.adapters),
                               ("device", "device", request.device),
                               ("timeout", "timeout_s", request.timeout_s),
                               ("wheelhouse", "wheelhouse", request.wheelhouse)):
        if given(option):
            run_overrides[key] = value
    overrides = {key: [value] for key, value in network.items()
                 if given({"time_steps": "steps", "graph": "network"}.get(key, key))}
    if given("neurons"):
        overrides["neurons"] = list(request.neurons)
    if given("reset"):
        overrides["reset"] = list(request.resets)
    if given("detach_reset") and request.detach_reset != "auto":  # auto: the config's own
        overrides["detach_reset"] = list(DETACH_CHOICES[request.detach_reset])
    return build_config(name, run_overrides, overrides)
