"""scripts/system-deps.sh, which `make test` runs first: nothing to do when the packages are there, and
where it may not install (not root, no password-less sudo) it stops at once with the command to run."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "system-deps.sh"
pytestmark = pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian/Ubuntu system")


def _run(packages: str, as_nobody: bool = False) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HEADSTART_SYSTEM_PACKAGES": packages}
    if not as_nobody:
        return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, cwd="/")
    # root in CI: run the script as an unprivileged user, who has no sudo here; from a copy it can read
    # (the clone may sit in a folder only root may enter, e.g. one made by mktemp -d)
    folder = Path(tempfile.mkdtemp())
    try:
        folder.chmod(0o755)
        script = folder / SCRIPT.name
        shutil.copy(SCRIPT, script)
        script.chmod(0o755)
        cmd = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "bash", str(script)]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, cwd="/")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_list_names_what_the_tests_need():
    out = subprocess.run(["bash", str(SCRIPT), "--list"], capture_output=True, text=True, timeout=30, check=True)
    needed = set(out.stdout.split())
    assert {"espeak-ng", "chromium", "nginx", "pulseaudio", "libportaudio2"} <= needed


def test_nothing_to_do_when_everything_is_installed():
    result = _run("bash coreutils")  # installed on every Debian system
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""


@pytest.mark.skipif(os.geteuid() != 0 and shutil.which("sudo") is not None,
                    reason="needs root (to become an unprivileged user) or a user without sudo")
def test_without_root_or_sudo_it_stops_at_once_with_the_command_to_run():
    missing = "headstart-no-such-package"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to drop root")
    result = _run(f"bash {missing}", as_nobody=os.geteuid() == 0)
    assert result.returncode == 1
    assert "the tests need these system packages: " + missing in result.stderr
    assert f"apt-get install -y --no-install-recommends {missing}" in result.stderr
    assert "bash" not in result.stderr.split("packages:")[1].split("\n")[0]  # only what is missing
