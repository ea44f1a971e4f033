"""How many processes to fork: the affinity count capped by a container's CPU quota."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from server import cpus

V2_MOUNT = "30 23 0:26 {root} /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
V1_MOUNT = "32 31 0:29 {root} /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"


def _tree(tmp: Path, cgroup: str, mountinfo: str, files: dict[str, str]) -> str:
    (tmp / "proc/self").mkdir(parents=True)
    (tmp / "proc/self/cgroup").write_text(cgroup)
    (tmp / "proc/self/mountinfo").write_text(mountinfo)
    for name, text in files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    return str(tmp)


@pytest.mark.parametrize(
    ("cgroup", "mountinfo", "files", "cores"),
    [
        # cgroup v2, a Docker container limited to 1.5 cores: rounded up.
        (
            "0::/docker/abc\n",
            V2_MOUNT.format(root="/"),
            {
                "sys/fs/cgroup/docker/abc/cpu.max": "150000 100000\n",
                "sys/fs/cgroup/docker/cpu.max": "max 100000\n",
            },
            2,
        ),
        # The lowest quota on the way up to the mount counts (a pod's, under its container).
        (
            "0::/kubepods/pod/ctr\n",
            V2_MOUNT.format(root="/"),
            {
                "sys/fs/cgroup/kubepods/pod/ctr/cpu.max": "max 100000\n",
                "sys/fs/cgroup/kubepods/pod/cpu.max": "50000 100000\n",
                "sys/fs/cgroup/kubepods/cpu.max": "400000 100000\n",
            },
            1,
        ),
        # Inside the container, its own cgroup mounted as the root of the hierarchy.
        (
            "0::/docker/abc\n",
            V2_MOUNT.format(root="/docker/abc"),
            {"sys/fs/cgroup/cpu.max": "300000 100000\n"},
            3,
        ),
        # cgroup v1: quota over period, the cpu controller mounted with cpuacct.
        (
            "4:memory:/x\n3:cpu,cpuacct:/kubepods/pod1\n",
            V1_MOUNT.format(root="/"),
            {
                "sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_quota_us": "300000\n",
                "sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.cfs_period_us": "100000\n",
            },
            3,
        ),
        # No quota (v1's -1, v2's max, this machine's), or nothing readable: no cap.
        (
            "1:cpu:/\n0::/\n",
            V1_MOUNT.format(root="/") + V2_MOUNT.format(root="/"),
            {
                "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
                "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
                "sys/fs/cgroup/cpu.max": "max 100000\n",
            },
            None,
        ),
        ("0::/a\n", V2_MOUNT.format(root="/"), {"sys/fs/cgroup/a/cpu.max": "garbage\n"}, None),
        ("0::/a\n", "", {}, None),
        # A path that climbs out of its mount is not followed.
        ("0::/../../etc\n", V2_MOUNT.format(root="/"), {"sys/etc/cpu.max": "100000 1\n"}, None),
    ],
)
def test_the_quota_of_the_cgroup_and_its_ancestors(
    tmp_path: Path, cgroup: str, mountinfo: str, files: dict[str, str], cores: int | None
) -> None:
    assert cpus.cgroup_quota(_tree(tmp_path, cgroup, mountinfo, files)) == cores


def test_usable_cpus_is_the_affinity_count_capped_by_the_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    affinity = len(os.sched_getaffinity(0))
    assert cpus.usable_cpus() == min(affinity, cpus.cgroup_quota("/") or affinity)
    root = _tree(tmp_path, "0::/c\n", V2_MOUNT.format(root="/"), {"sys/fs/cgroup/c/cpu.max": ""})
    monkeypatch.setattr(cpus, "_ROOT", root)
    monkeypatch.setattr(cpus, "_FOUND", [])
    (tmp_path / "sys/fs/cgroup/c/cpu.max").write_text("100000 100000\n")
    assert cpus.usable_cpus() == 1  # lint forks no worker, nor precount a child
    from server.cli.lint.run import _n_workers

    assert _n_workers(1000, None) == 1
    monkeypatch.setattr(cpus, "_FOUND", [])
    (tmp_path / "sys/fs/cgroup/c/cpu.max").write_text("max 100000\n")
    assert cpus.usable_cpus() == affinity
