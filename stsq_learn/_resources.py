"""What this machine and process can still hold: available memory and address space.

The memory checks made before any work (a fit's, :mod:`stsq_learn.engine.memory`;
a length scale's simulation, :mod:`stsq_learn.encodings.length_scale`; the
CLI's rows) ask these; this module imports nothing of the package, so any
layer may use it.
"""

from __future__ import annotations

import os

import torch


def available_bytes(device):
    """Memory a fit may take on ``device``: free CUDA memory, or the RAM the OS calls available.

    Bytes, or None where the system does not say.
    """
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX system
        return None


def address_space_left():
    """Bytes this process may still map under its address-space limit (``ulimit -v``), or None."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status") as fh:
            size = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    except (ImportError, OSError, ValueError, StopIteration):  # not Linux
        return None
    return max(soft - size, 0)


def gib(n_bytes):
    """``n_bytes`` in GiB, for messages: ``"4.96 GiB"``."""
    return f"{n_bytes / 2**30:.3g} GiB"
