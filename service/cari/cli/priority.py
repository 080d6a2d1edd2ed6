"""Who gets the CPU first on a shared machine: a batch job yields it, the server asks for it
promptly.

A batch job (`cari ingest`, `reembed`, `refit`) lowers its niceness and its session's autogroup's.
Linux (with `CONFIG_SCHED_AUTOGROUP`, on in most distributions' kernels) puts each session's
processes in a group and shares the CPU between groups first: a niceness acts only inside its
own group. A `cari ingest` typed in a terminal and a `cari serve` started elsewhere are in
different groups, so the niceness alone left them half the CPU each (`bench.serving`: fresh
questions' p95 1.6-2.4x alone beside an ingest at niceness 10, the ingest taking a whole core).
The group is the whole session's (the shell the command was typed in, too), so its niceness is
put back when the job ends.

`cari serve` asks for short time slices (Linux >= 6.12, EEVDF's custom slice). A question wakes
the server's threads many times (the model's threads between its parallel steps, the event
loop on each reply): with the default slice (0.7 ms times 1 + log2 of the cores) each wakeup
may wait for a batch job's running slice to end; a thread with a shorter slice preempts it at
once. Older kernels ignore the request.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import platform
import re
import struct
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

AUTOGROUP = Path("/proc/self/autogroup")
# sched_setattr(2)'s number: it has no wrapper in glibc or Python.
SCHED_SETATTR = {"x86_64": 314, "aarch64": 274, "riscv64": 274}
# struct sched_attr, its first version (48 bytes): size, policy, flags, nice, priority,
# runtime, deadline, period.
SCHED_ATTR = struct.Struct("=IIQiIQQQ")


def _autogroup_nice() -> int | None:
    """This session's autogroup niceness; None where the kernel has no autogroups (or this is
    not Linux)."""
    try:
        found = re.search(r"nice (-?\d+)", AUTOGROUP.read_text())
    except OSError:
        return None
    return int(found.group(1)) if found else None


def _set_autogroup_nice(value: int) -> bool:
    try:
        AUTOGROUP.write_text(f"{value}\n")
    except OSError as error:
        log.info("could not lower this session's CPU priority: %s", error)
        return False
    return True


@contextlib.contextmanager
def lowered(niceness: int) -> Iterator[None]:
    """This process at `niceness` (threads started from now on inherit it), and its session's
    autogroup at least as low until the block ends; nothing where `niceness` is 0."""
    if niceness <= 0:
        yield
        return
    os.nice(niceness)
    before = _autogroup_nice()
    changed = before is not None and before < niceness and _set_autogroup_nice(niceness)
    try:
        yield
    finally:
        if changed and before is not None:
            _set_autogroup_nice(before)


def ask_short_slices(microseconds: int) -> bool:
    """A time slice of `microseconds` for each thread of this process, and so for the threads
    and processes they start from now on (which inherit it); False where the kernel or platform
    has no way to ask (or `microseconds` is 0). The kernel clamps it to 0.1-100 ms."""
    number = SCHED_SETATTR.get(platform.machine())
    if not microseconds or number is None or os.sched_getscheduler(0) != os.SCHED_OTHER:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    for task in Path("/proc/self/task").iterdir():
        tid = int(task.name)
        attr = SCHED_ATTR.pack(
            SCHED_ATTR.size,
            os.SCHED_OTHER,
            0,
            os.getpriority(os.PRIO_PROCESS, tid),  # sched_setattr sets the niceness too
            0,
            microseconds * 1000,
            0,
            0,
        )
        buffer = ctypes.create_string_buffer(attr, SCHED_ATTR.size)
        if libc.syscall(number, tid, buffer, 0) != 0:
            error = ctypes.get_errno()
            if error == errno.ESRCH:  # the thread ended meanwhile
                continue
            log.info("could not ask for short time slices: %s", os.strerror(error))
            return False
    return True
