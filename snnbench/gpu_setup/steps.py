"""One planner per library: what to install or build on this machine, and the check that says
whether the library works. :data:`PLANNERS` is the order they are set up in."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from snnbench.gpu_setup.context import (
    MIN_SETUPTOOLS,
    ROOTS,
    Command,
    Context,
    Options,
    Step,
    check_code,
    import_check,
)
from snnbench.gpu_setup.machine import (
    arch_list,
    build_blocker,
    cuda_major,
    cupy_distribution,
    older_than,
)


def plan_build_tools(ctx: Context) -> Step:
    """setuptools ≥ 77.0.3 (SpikingJelly's build), wheel, ninja (parallel and JIT builds)."""
    wanted = ctx.missing(["setuptools", "wheel", "ninja"])
    have = ctx.machine.installed.get("setuptools")
    if have and older_than(have, MIN_SETUPTOOLS):
        wanted.append("setuptools")
    commands = (Command(ctx.pip(*(ctx.lock.pin(n) for n in wanted))),) if wanted else ()
    minimum = str(MIN_SETUPTOOLS)
    check = check_code(f"""
import shutil
# the target environment need not have `packaging`: compare the release numbers
low = tuple(int(p) for p in ver("setuptools").split(".")[:3] if p.isdigit())
if low < {MIN_SETUPTOOLS.release!r}:
    done(False, "setuptools %s is older than {minimum}" % ver("setuptools"))
import wheel
ninja = shutil.which("ninja")
if ninja is None:
    done(False, "no ninja on PATH (torch needs it to compile extensions)")
done(True, "setuptools %s, wheel %s, ninja %s" % (ver("setuptools"), ver("wheel"), ninja))
""")
    return Step("build-tools", check, commands, note=f"missing or too old: {wanted or 'none'}")



def plan_harness(ctx: Context) -> Step:
    """snnbench itself and the harness' dependencies.

    From a checkout, snnbench is installed editable from it; from an installed wheel (no
    ``pyproject.toml`` above this file), the installed snnbench is the one checked.
    """
    commands = ctx.install_missing(ROOTS["harness"])
    if not (ctx.root / "pyproject.toml").exists():
        check = import_check(["snnbench.cli", "pynvml", "numpy", "scipy", "pandas", "pyarrow"],
                              "snnbench")
        return Step("harness", check, commands)
    commands += (Command(ctx.pip("--no-build-isolation", "-e", str(ctx.root))),)
    # an snnbench installed from elsewhere (an older copy in site-packages) would run instead
    # of this checkout's: only this checkout's counts
    check = import_check(["snnbench.cli", *("pynvml", "numpy", "scipy", "pandas", "pyarrow")],
                          "snnbench", pre=f"""
import snnbench
where = os.path.dirname(os.path.realpath(snnbench.__file__))
if where != os.path.realpath({str(ctx.root / "snnbench")!r}):
    done(False, "snnbench imports from %s, not from this checkout" % where)
""")
    return Step("harness", check, commands)


def _library(name: str, modules: Sequence[str], pre: str = "") -> Callable[[Context], Step]:
    def plan(ctx: Context) -> Step:
        return Step(name, import_check(modules, name, pre), ctx.install_missing(ROOTS[name]))

    plan.__doc__ = f"{name}: install what its import needs ({', '.join(ROOTS[name])}), if missing."
    return plan


_HIDE_SAMNA = "sys.modules.setdefault('samna', None)"


def plan_spikingjelly(ctx: Context) -> Step:
    """SpikingJelly from source with its native CUDA operators (``SJ_BUILD_NATIVE_CUDA=1``)."""
    machine = ctx.machine
    archs = arch_list(machine, ctx.options.arch_list, ctx.environ)
    version = ctx.lock.pins.get("spikingjelly", "")
    blocked = build_blocker(machine, archs)
    installed = machine.installed.get("spikingjelly", "")
    if installed.startswith("0."):
        blocked = (f"SpikingJelly {installed} is a legacy release (native operators arrived in "
                   "2.0); leave it, or uninstall it to build 2.x")
    deps = ctx.install_missing(ROOTS["spikingjelly"])
    source = ctx.source("spikingjelly", ctx.options.spikingjelly_source)
    target = (str(source),) if source else ("--no-binary", "spikingjelly", ctx.lock.pin(
        "spikingjelly"))
    build = Command(ctx.pip("--no-build-isolation", "--force-reinstall", *target),
                    {**ctx.build_env(archs or ""), "SJ_BUILD_NATIVE_CUDA": "1"})
    check = check_code("""
import importlib.util, torch
import spikingjelly.activation_based.neuron
spec = importlib.util.find_spec("spikingjelly._ops.lif._C")
if spec is None:
    done(False, "SpikingJelly %s has no native CUDA operators (not built with "
         "SJ_BUILD_NATIVE_CUDA=1)" % ver("spikingjelly"))
info = json.loads(open(os.path.join(os.path.dirname(spec.origin), "_native_build.json")).read())
if info["torch_version"] != str(torch.__version__) or info["cuda_version"] != torch.version.cuda:
    done(False, "native operators built for torch %s / CUDA %s, running %s / %s: rebuild" % (
        info["torch_version"], info["cuda_version"], torch.__version__, torch.version.cuda))
where = "archs %s" % info.get("torch_cuda_arch_list")
if gpu():
    from spikingjelly._ops import native_loader
    if not native_loader._native_available("spikingjelly._ops.lif", 0):
        done(False, "native LIF operator does not run on this GPU (%s)" % where)
    where += ", runs on " + torch.cuda.get_device_name(0)
done(True, "%s, native CUDA operators for torch %s (%s)" % (ver("spikingjelly"),
                                                          info["torch_version"], where))
""")
    note = (f"build spikingjelly {version or installed} from "
            f"{source or 'its sdist'} for TORCH_CUDA_ARCH_LIST={archs}")
    return Step("spikingjelly", check, (*deps, build), note=note, blocked=blocked,
                check_timeout_s=300)


def plan_exodus(ctx: Context) -> Step:
    """sinabs-exodus compiled against the installed torch (``--no-build-isolation``)."""
    machine = ctx.machine
    archs = arch_list(machine, ctx.options.arch_list, ctx.environ)
    source = ctx.source("sinabs-exodus", ctx.options.exodus_source)
    target = (str(source),) if source else ("--no-binary", "sinabs-exodus",
                                            ctx.lock.pin("sinabs-exodus"))
    build = Command(ctx.pip("--no-build-isolation", "--force-reinstall", *target),
                    ctx.build_env(archs or ""))
    check = check_code("""
import torch
import sinabs.exodus.layers, exodus_cuda
if not gpu():
    done(True, "%s (exodus_cuda imports; no GPU visible to run it)" % ver("sinabs-exodus"))
from sinabs.exodus.layers import LIF
out = LIF(tau_mem=10.0).cuda()(torch.full((2, 8, 4), 0.5, device="cuda"))
torch.cuda.synchronize()
done(True, "%s, runs on %s" % (ver("sinabs-exodus"), torch.cuda.get_device_name(0)))
""")
    note = f"build sinabs-exodus from {source or 'its sdist'} for TORCH_CUDA_ARCH_LIST={archs}"
    return Step("sinabs-exodus", check, (build,), note=note,
                blocked=build_blocker(machine, archs), check_timeout_s=300)


def plan_jax_cuda(ctx: Context) -> Step:
    """JAX's CUDA plugin and PJRT at the installed jaxlib's version (the machine's JAX is kept)."""
    machine = ctx.machine
    major = cuda_major(machine)
    blocked = None
    commands: tuple[Command, ...] = ()
    if machine.jaxlib is None:
        blocked = "jax/jaxlib are not installed (this script keeps the machine's JAX)"
    elif major is None:
        blocked = "no CUDA found (torch is a CPU build and there is no nvcc)"
    names = (f"jax-cuda{major}-plugin", f"jax-cuda{major}-pjrt")
    if not blocked and any(machine.installed.get(n) != machine.jaxlib for n in names):
        commands = (Command(ctx.pip(*(f"{n}=={machine.jaxlib}" for n in names))),)
    expect_gpu = bool(machine.gpus)
    check = check_code(f"""
import jax
names = (str(n.metadata["Name"] or "").replace("_", "-").lower() for n in md.distributions())
plugins = sorted(d for d in names if d.startswith("jax-cuda") and d.endswith("-plugin"))
if not plugins:
    done(False, "no JAX CUDA plugin installed: JAX runs on the CPU")
try:
    gpus = jax.devices("gpu")
except RuntimeError as exc:
    if {expect_gpu!r}:
        done(False, "JAX sees no GPU (torch does): %s" % str(exc).splitlines()[0])
    done(True, "jax %s, %s %s (no GPU visible here)" % (jax.__version__, plugins[0],
                                                         ver(plugins[0])))
done(True, "jax %s, %s %s, sees %s" % (jax.__version__, plugins[0], ver(plugins[0]),
                                       gpus[0].device_kind))
""")
    note = f"{names[0]}=={machine.jaxlib}" if major else "no CUDA"
    return Step("jax-cuda", check, commands, note=note, blocked=blocked)


def plan_spyx(ctx: Context) -> Step:
    """spyx and what ``import spyx`` needs (flax.nnx, grain, portpicker, nir, optax...)."""
    step = _library("spyx", ("spyx",), pre="""
import jax
try:
    import flax.nnx
except Exception as exc:
    done(False, "flax %s does not import with jax %s (%s: %s): a flax release made for this "
         "jax is needed; this script keeps the machine's flax" % (
             ver("flax"), jax.__version__, type(exc).__name__, exc))
""")(ctx)
    return replace(step, note="flax: kept as installed" if "flax" in ctx.machine.installed
                   else f"flax: {ctx.lock.pin('flax')} (not installed)")


def plan_lava_dl(ctx: Context) -> Step:
    """lava-dl alone (``--no-deps --ignore-requires-python``) plus what its import needs; with a
    GPU, its CUDA extension is compiled now and cached by torch for every later process."""
    commands: tuple[Command, ...] = ()
    if "lava-dl" not in ctx.machine.installed:
        commands = (Command(ctx.pip("--ignore-requires-python", ctx.lock.pin("lava-dl"))),)
    commands += ctx.install_missing(ROOTS["lava-dl"])
    check = check_code("""
import types
try:
    import torchvision
except Exception:  # a torchvision built for another torch: stubs, as the adapter does
    for key in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
        del sys.modules[key]
    for key in ("torchvision", "torchvision.ops", "torchvision.transforms"):
        sys.modules[key] = types.ModuleType(key)
with contextlib.redirect_stdout(sys.stderr):
    import lava.lib.dl.slayer as slayer
if not gpu():
    done(True, "%s (no GPU visible: its CUDA extension compiles at first use)" % ver("lava-dl"))
import re, torch
# lava pins its JIT build to sm_80 on every GPU of capability >= 8, which cannot run on a Hopper
# ("no kernel image is available"). The rule is the adapter's pin_jit_arch, restated because
# this check must run where snnbench is not installed (gpu_setup imports none of it)
own = "%d.%d" % torch.cuda.get_device_capability()
wanted = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
archs = {a.removesuffix("+PTX") for a in re.split(r"[;, ]+", wanted.strip())}
slayer.jitconfig.TORCH_CUDA_ARCH_LIST = wanted if own in archs else own
start = time.perf_counter()
slayer.neuron.dynamics.leaky_integrator.Accelerated.leaky_integrator
built = time.perf_counter() - start
# a tiny CUBA neuron, forward and backward: a build for the wrong GPU loads but cannot launch
neuron = slayer.neuron.cuba.Neuron(threshold=1.0, current_decay=1.0, voltage_decay=0.1,
                                   requires_grad=False).cuda()
x = torch.rand(2, 8, 16, device="cuda", requires_grad=True)
neuron(x).sum().backward()
torch.cuda.synchronize()
from torch.utils.cpp_extension import _get_build_directory
where = _get_build_directory("dynamics", False)
done(True, "%s, CUDA extension for sm %s ready in %.0f s and runs (cached in %s)" % (
    ver("lava-dl"), slayer.jitconfig.TORCH_CUDA_ARCH_LIST, built, where))
""")
    return Step("lava-dl", check, commands, check_timeout_s=1200)


def plan_cupy(ctx: Context) -> Step:
    """The CuPy wheel for this CUDA major (SpikingJelly 0.0.0.0.x's CuPy backend)."""
    machine = ctx.machine
    dist = cupy_distribution(machine)
    blocked = None
    commands: tuple[Command, ...] = ()
    others = sorted(n for n in machine.installed
                    if re.fullmatch(r"cupy(-cuda\d+x)?", n) and n != dist)
    if dist is None:
        blocked = "no CUDA found (torch is a CPU build and there is no nvcc)"
    elif others:
        blocked = (f"{', '.join(others)} installed, but this machine's CUDA needs {dist}: "
                   f"uninstall {' '.join(others)} first")
    elif dist not in machine.installed:
        commands = (Command(ctx.pip(ctx.lock.pin(dist))),
                    *ctx.install_missing(ROOTS["cupy"]))
    check = check_code(f"""
if not gpu():  # an image build: no driver to load CuPy against, so only the install is checked
    wheel = {dist or "cupy"!r}
    if ver(wheel) == "?":
        done(False, "%s is not installed" % wheel)
    done(True, "%s %s (no GPU visible: not loaded here)" % (wheel, ver(wheel)))
import cupy
runtime = cupy.cuda.runtime.runtimeGetVersion()
detail = "cupy %s (CUDA runtime %d.%d)" % (cupy.__version__, runtime // 1000, runtime % 1000 // 10)
double = cupy.ElementwiseKernel("float32 x", "float32 y", "y = 2 * x", "snnbench_double")
if float(double(cupy.ones(4, dtype="float32")).sum()) != 8.0:
    done(False, "a CuPy kernel computed a wrong result")
done(True, detail + ", compiles and runs kernels")
""")
    source = f"CUDA {machine.torch_cuda} from torch" if machine.torch_cuda else (
        f"CUDA {machine.nvcc} from nvcc")
    return Step("cupy", check, commands, note=f"{dist} ({source})", blocked=blocked)


#: the libraries, in the order they are set up (sinabs before sinabs-exodus, jax before spyx)
PLANNERS: dict[str, Callable[[Context], Step]] = {
    "build-tools": plan_build_tools,
    "harness": plan_harness,
    "snntorch": _library("snntorch", ("snntorch",)),
    "norse": _library("norse", ("norse.torch",)),
    "spikingjelly": plan_spikingjelly,
    "sinabs": _library("sinabs", ("sinabs.layers",), pre=_HIDE_SAMNA),
    "sinabs-exodus": plan_exodus,
    "rockpool": _library("rockpool", ("rockpool.nn.modules.torch.lif_neuron_torch",),
                         pre=_HIDE_SAMNA),
    "dm-haiku": _library("dm-haiku", ("haiku",)),
    "jax-cuda": plan_jax_cuda,
    "brainstate": _library("brainstate", ("brainstate", "braintools")),
    "spyx": plan_spyx,
    "lava-dl": plan_lava_dl,
    "cupy": plan_cupy,
}


def selected(options: Options) -> list[str]:
    """The libraries ``--only`` / ``--skip`` leave, in :data:`PLANNERS`' order: what ``install``
    and ``check`` set up and what ``download`` fetches for."""
    return [n for n in PLANNERS if (not options.only or n in options.only)
            and n not in options.skip]


def plan(ctx: Context) -> list[Step]:
    """The steps to run, in order, after ``--only`` / ``--skip``."""
    return [PLANNERS[name](ctx) for name in selected(ctx.options)]

