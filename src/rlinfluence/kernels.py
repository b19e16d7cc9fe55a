"""Which floating-point kernels a process runs: pinned before torch loads, so that a run's numbers do not
depend on the CPU that makes them.

torch picks its elementwise kernels (ATen's CPU capability), MKL its matrix-product code path and oneDNN its
convolutions' instruction set from the CPU they find, and each choice rounds differently: a FrozenLake IIF run
under ATen's AVX2 or AVX-512 kernels, or under MKL's COMPATIBLE path, leaves the run under ATen's DEFAULT ones
at round 24 (docs/reproduction.md, "Hardware"). `RLINFLUENCE_KERNELS=pinned`, the default, fixes all three to
paths every x86-64 CPU with AVX2 runs alike, Intel or AMD (measured for SGD runs; Adam runs still differ across the
two vendors, docs/reproduction.md); `native` leaves the choice to the libraries (numbers of that CPU class only).
This module imports nothing heavy: the console entry pins before importing torch.
"""

from __future__ import annotations

import os
import platform
from collections.abc import MutableMapping
from pathlib import Path

SETTING = "RLINFLUENCE_KERNELS"
PINNED, NATIVE = "pinned", "native"
# ATen's DEFAULT kernels are its baseline build (no dispatch on the CPU); MKL's COMPATIBLE path is the one it
# documents as giving the same results on Intel and non-Intel CPUs; oneDNN capped at AVX2 runs the same jitted
# convolutions with or without AVX-512.
PIN = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "AVX2"}
UNKNOWN = "unknown"
UNKNOWN_CLASS = "unknown hardware (the run was made before runs recorded it)"


def chosen(environ: MutableMapping[str, str]) -> str:
    """The setting's value; ValueError (one line, naming the setting and its values) for any other."""
    value = environ.get(SETTING, PINNED)
    if value not in (PINNED, NATIVE):
        raise ValueError(f"{SETTING}={value!r} is not one of: {PINNED} (the default), {NATIVE}")
    return value


def pin_kernels(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set the library variables that choose the kernels, unless the setting is `native`. Only a process
    that has not imported torch yet is pinned: torch, MKL and oneDNN read them once, when they load."""
    if chosen(environ) == PINNED:
        environ.update(PIN)


def cpu_model() -> str:
    """`AMD EPYC (family 26, model 2)`: the model name, and on Linux x86 the family and model numbers that
    tell CPU generations apart where the name does not (a virtual machine's `AMD EPYC`)."""
    cpuinfo = Path("/proc/cpuinfo")
    fields: dict[str, str] = {}
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if not line.strip():
                break  # the first processor's block names them all
            fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in fields and "model" in fields:
        return f"{name} (family {fields['cpu family']}, model {fields['model']})"
    return name


def pinned_unavailable() -> str | None:
    """Why this machine cannot run the pinned kernels (None when it can). Imports torch."""
    import torch

    if platform.machine().lower() not in ("x86_64", "amd64"):
        return f"a {platform.machine()} CPU, not x86-64"
    if not torch.cpu._is_avx2_supported():
        return "a CPU without AVX2"
    if not torch.backends.mkl.is_available():
        return "a torch built without MKL"
    return None


def kernels_in_force(environ: MutableMapping[str, str] = os.environ) -> str:
    """`pinned: ATen DEFAULT, MKL_CBWR=COMPATIBLE, ONEDNN_MAX_CPU_ISA=AVX2` where the pin is what this process
    runs, else `native: ...` with what the libraries chose, or `native (pinned unavailable: <why>): ...`.
    Read from what is in force, not from the setting: a process that imported torch before pinning is native.
    Imports torch."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    variables = [name for name in PIN if name != "ATEN_CPU_CAPABILITY"]
    libraries = ", ".join(
        [f"ATen {capability}"]
        + [f"{name}={environ[name]}" if name in environ else f"{name} unset" for name in variables]
    )
    unavailable = pinned_unavailable()
    if unavailable is not None and chosen(environ) == PINNED:
        return f"{NATIVE} (pinned unavailable: {unavailable}): {libraries}"
    pinned = capability == PIN["ATEN_CPU_CAPABILITY"].upper() and all(environ.get(n) == PIN[n] for n in variables)
    return f"{PINNED if pinned and unavailable is None else NATIVE}: {libraries}"


def unavailable_line(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """The one line a run starts with where the pinned kernels were asked for and this machine lacks them."""
    if chosen(environ) != PINNED or (why := pinned_unavailable()) is None:
        return None
    return (
        f"{SETTING}={PINNED}: this machine is {why}, so its numbers are its own class's, not the pinned "
        f"kernels' (recorded in summary.json)"
    )


def cpu_vendor(cpu: str) -> str:
    """`AMD` or `Intel` from a `cpu_model()` name; the name itself where it names neither."""
    return next((vendor for vendor in ("AMD", "Intel") if vendor in cpu), cpu)


def hardware_class(cpu: str | None, kernels: str | None, device: str | None, optimizer: str | None = None) -> str:
    """What decides a run's floating-point path, as replay compares it: a GPU by its name, the pinned kernels
    on any CPU alike (an Adam run's on any CPU of its vendor: Adam's step rounds differently on AMD and Intel
    under them, docs/reproduction.md), native kernels by CPU model; unknown for a run made before runs recorded
    it."""
    if kernels is None or cpu is None or device is None:
        return UNKNOWN_CLASS
    if device != "cpu":
        return device
    setting, _, libraries = kernels.rpartition(": ")
    if setting != PINNED:
        return f"{cpu} with {setting} kernels ({libraries})"
    pinned = f"the pinned kernels ({libraries})"
    return f"{pinned} on an {cpu_vendor(cpu)} CPU (Adam)" if optimizer == "adam" else pinned
