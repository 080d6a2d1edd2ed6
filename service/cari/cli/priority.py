"""Who gets the CPU first on a shared machine: a batch job yields it, the server asks for it
promptly.

A batch job (`cari ingest`, `reembed`, `refit`) lowers its niceness and its session's autogroup's.
Linux (with `CONFIG_SCHED_AUTOGROUP`, on in most distributions' kernels) puts each session's
processes in a group and shares the CPU between groups first: a niceness acts only inside its
own group. A `cari ingest` typed in a terminal and a `cari serve` started elsewhere are in
different groups, so the niceness alone left them half the CPU each (`bench.serving`: fresh
questions' p95 1.6-2.4x alone beside an ingest at niceness 10, the ingest taking a whole core).
The group is the whole session's, so the job first moves into a session of its own: lowering
the caller's would lower everything else in it too (the shell, a `cari serve &` started from
it, a test run beside the services it started, which then starved under load from other
sessions). It forks: the job goes on in the child, in a new session, and the parent stays in the
caller's process group, passing on the signals it gets (Ctrl-C, Ctrl-Z, a `kill`) and the
child's exit status.

A job at a lowered niceness on a busy machine can get almost no CPU: one typed at a terminal
beside other work showed no progress for 12 minutes. With the local model (whose work is this
process's) it is measured every STARVED_WINDOW_S, and the job says so once, naming the setting.

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
import signal
import struct
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import click

log = logging.getLogger(__name__)

AUTOGROUP = Path("/proc/self/autogroup")
# sched_setattr(2)'s number: it has no wrapper in glibc or Python.
SCHED_SETATTR = {"x86_64": 314, "aarch64": 274, "riscv64": 274}
# prctl(2)'s PR_SET_PDEATHSIG: the child of `own_session` is killed with its parent, as the
# job was when it was one process.
PR_SET_PDEATHSIG = 1
# What the parent of `own_session` passes on to the job.
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
# struct sched_attr, its first version (48 bytes): size, policy, flags, nice, priority,
# runtime, deadline, period.
SCHED_ATTR = struct.Struct("=IIQiIQQQ")
# A batch job that got less than STARVED_SHARE of one core over STARVED_WINDOW_S while the
# machine had more runnable work than cores is being starved.
STARVED_WINDOW_S = 15.0
STARVED_SHARE = 0.25


def _autogroup_nice() -> int | None:
    """This session's autogroup niceness; None where the kernel has no autogroups, this is not
    Linux, or this process is in none (one started by a container's init or a daemon that never
    began a session, or one in a cpu cgroup, shows none): there its niceness alone acts."""
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


def own_session() -> None:
    """Go on in a session of its own (and so an autogroup of its own), where the kernel has
    autogroups: in a forked child, while this process waits for it (it never returns). This
    process could not leave its session while it leads its process group (as a command typed in
    a shell does), and it stays in the caller's group, where a terminal's Ctrl-C or a script's
    `kill` of the group reaches it. Call it before anything that a fork would copy badly
    (threads, database connections, an embedded server's handle)."""
    if _autogroup_nice() is None or os.getsid(0) == os.getpid():
        return
    if threading.active_count() > 1:
        log.info("not moving into a session of its own: threads are running")
        return
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:  # else written twice, by both processes
            stream.flush()
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        os.setsid()
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl
            os.kill(os.getpid(), signal.SIGKILL)
        return
    _wait_for(child)


def _wait_for(child: int) -> None:
    """The parent's part: pass signals on to `child` until it ends, then end as it did."""

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile: waitpid says how
            os.kill(child, signum)

    def stop(_signum: int, _frame: object) -> None:  # Ctrl-Z stops the job with the command
        forward(signal.SIGSTOP, None)
        os.kill(os.getpid(), signal.SIGSTOP)
        forward(signal.SIGCONT, None)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    signal.signal(signal.SIGTSTP, stop)
    _, status = os.waitpid(child, 0)  # retried after each handler (PEP 475)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:  # killed by a signal: so is this process, as a shell expects
        with contextlib.suppress(OSError):  # SIGKILL's action cannot be set, and is the default
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code if code >= 0 else 128 - code)


@contextlib.contextmanager
def lowered(niceness: int) -> Iterator[None]:
    """This process at `niceness` (threads started from now on inherit it), and, where it leads
    its session (`own_session` makes it so), the session's autogroup at least as low until the
    block ends; nothing where `niceness` is 0. Any other session's autogroup is the caller's,
    and lowering it would lower everything else in it."""
    if niceness <= 0:
        yield
        return
    os.nice(niceness)
    before = _autogroup_nice() if os.getsid(0) == os.getpid() else None
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


def starved(cpu_s: float, wall_s: float, load: float, cores: int) -> bool:
    """Whether a job that wanted the CPU throughout (it computes the local model) got too
    little of it on a machine busier than its cores."""
    return wall_s > 0 and cpu_s / wall_s < STARVED_SHARE and load > cores


def starved_warning(cpu_s: float, wall_s: float, load: float, cores: int, niceness: int) -> str:
    return (
        f"warning: this job got {cpu_s:.1f} s of CPU in the last {wall_s:.0f} s: the machine is "
        f"busy (load {load:.1f} on {cores} cores) and the job runs at niceness {niceness} "
        "(CARI_BATCH_NICENESS), so that other work, a `cari serve` first, keeps the CPU. "
        "CARI_BATCH_NICENESS=0 runs it at their priority."
    )


async def warn_when_starved(niceness: int) -> None:
    """Say once, on stderr, that this batch job is starved (`starved`), and how to stop it."""
    cores = len(os.sched_getaffinity(0))
    cpu, since = time.process_time(), time.monotonic()
    while True:
        await anyio.sleep(STARVED_WINDOW_S)
        used, wall = time.process_time() - cpu, time.monotonic() - since
        load = os.getloadavg()[0]
        if starved(used, wall, load, cores):
            click.echo(starved_warning(used, wall, load, cores, niceness), err=True)
            return
        cpu, since = time.process_time(), time.monotonic()
