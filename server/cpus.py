"""How many cores this process may use: what decides how many processes to fork.

``os.cpu_count()`` counts the machine's cores, and ``os.sched_getaffinity`` those the
process may be scheduled on, but neither sees a container's CPU quota (``docker --cpus 2``,
a CI runner's limit, Kubernetes' ``limits.cpu``): on a 64-core host, a job limited to two
cores would fork 64 lint workers, each with its own analyses in memory. ``usable_cpus``
caps the affinity count by the Linux cgroup quota of the process's cgroup and of every
cgroup above it (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``),
rounded up, as Rust's ``std::thread::available_parallelism`` does (ruff's worker count).
Anything unreadable means no quota. The standard library only, a few small reads: it runs
before the engine is imported (``server.precount``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

_ROOT = "/"


def usable_cpus() -> int:
    """Cores this process may use (at least 1); found once a process (a forked child finds
    them again: it may have been moved)."""
    pid = os.getpid()
    if _FOUND and _FOUND[0][0] == pid:
        return _FOUND[0][1]
    n = _usable_cpus()
    _FOUND[:] = [(pid, n)]
    return n


_FOUND: list[tuple[int, int]] = []  # (pid, cores)


def _usable_cpus() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = cgroup_quota(_ROOT)
    if quota is not None:
        n = min(n, quota)
    return max(1, n)


def cgroup_quota(root: str) -> int | None:
    """The smallest CPU quota, in whole cores rounded up, of this process's cgroup and its
    ancestors (``root``: where ``proc`` and ``sys`` are, ``/`` but in tests); None: none."""
    try:
        with open(os.path.join(root, "proc/self/cgroup"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        with open(os.path.join(root, "proc/self/mountinfo"), encoding="utf-8") as f:
            mounts = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:  # v2 (one hierarchy) first, as the kernel prefers it
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            found = _lowest(root, mounts, "cgroup2", None, path, _v2_quota)
            if found is not None:
                return found
    for line in lines:
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if "cpu" in controllers.split(","):
            return _lowest(root, mounts, "cgroup", "cpu", path, _v1_quota)
    return None


def _lowest(
    root: str,
    mounts: list[str],
    fstype: str,
    option: str | None,
    path: str,
    read: Callable[[str], int | None],
) -> int | None:
    """The lowest quota ``read`` finds in the cgroup ``path`` and its ancestors, under the
    mount of ``fstype`` (with super option ``option``) that holds it."""
    for mount in mounts:
        fields = mount.split()
        if " - " not in mount or len(fields) < 5:
            continue
        after = mount.split(" - ", 1)[1].split()
        if len(after) < 3 or after[0] != fstype:
            continue
        if option is not None and option not in after[2].split(","):
            continue
        mount_root, mount_point = fields[3], fields[4]
        rel = path
        if mount_root != "/" and (path == mount_root or path.startswith(mount_root + "/")):
            rel = path[len(mount_root) :]
        top = os.path.normpath(os.path.join(root, mount_point.lstrip("/")))
        folder = os.path.normpath(os.path.join(top, rel.lstrip("/")))
        if not (folder == top or folder.startswith(top + os.sep)):
            return None  # a path that leaves its mount (``..``): not ours to read
        lowest: int | None = None
        while True:
            quota = read(folder)
            if quota is not None:
                lowest = quota if lowest is None else min(lowest, quota)
            if folder == top:
                return lowest
            folder = os.path.dirname(folder)
    return None


def _cores(quota: int, period: int) -> int | None:
    if quota <= 0 or period <= 0:
        return None
    return max(1, -(-quota // period))


def _v2_quota(folder: str) -> int | None:
    try:
        with open(os.path.join(folder, "cpu.max"), encoding="ascii") as f:
            quota, _, period = f.read().strip().partition(" ")
        if quota == "max":
            return None
        return _cores(int(quota), int(period or "100000"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def _v1_quota(folder: str) -> int | None:
    try:
        with open(os.path.join(folder, "cpu.cfs_quota_us"), encoding="ascii") as f:
            quota = int(f.read().strip())
        with open(os.path.join(folder, "cpu.cfs_period_us"), encoding="ascii") as f:
            period = int(f.read().strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return _cores(quota, period)
