"""P8 Docker runtime: REST submit -> the command inside the container has run, vs a bare `docker run`."""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from pathlib import Path

from .common import BENCH_LABEL, IMAGE, Daemon, Figure, median, ratio, remove_containers, v1, wait_file

P8_JOBS = 10
# busybox's date has no %N; its adjtimex prints the wall clock in microseconds (read-only, allowed by seccomp)
STAMP = "adjtimex > {path}"


def _parse_adjtimex(text: str) -> float:
    sec = re.search(r"tv_sec:\s*(\d+)", text)
    usec = re.search(r"tv_usec:\s*(\d+)", text)
    if not sec or not usec:
        raise ValueError(f"no time in adjtimex output: {text!r}")
    return int(sec.group(1)) + int(usec.group(1)) / 1e6


def _docker_ok() -> str | None:
    """None when `docker info` answers and the image is here (built with tests/make_busybox_image.sh if not)."""
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`docker info` failed: {exc}"
    if info.returncode != 0:
        return f"`docker info` failed: {info.stderr.decode(errors='replace').strip()[:200]}"
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode != 0:
        script = Path(__file__).resolve().parent.parent / "make_busybox_image.sh"
        built = subprocess.run(["bash", str(script), IMAGE], capture_output=True)
        if built.returncode != 0:
            return f"the image {IMAGE} is missing and could not be built: {built.stderr.decode()[-200:]}"
    return None


def p8_docker_submit_to_running() -> Figure:
    fig = Figure("P8", "Docker submit -> command in container ran", "ms", "<= baseline + 100 ms")
    why = _docker_ok()
    if why:
        fig.note = f"skipped: {why}"
        return fig
    values: list[float] = []
    answers: list[float] = []
    bases: list[float] = []
    try:
        with (
            tempfile.TemporaryDirectory(prefix="pai-bench-p8-") as tmp,
            Daemon("p8", runtime="docker", memory_mb=4096) as d,
        ):
            out = Path(tmp)
            user = None
            for i in range(P8_JOBS + 1):  # the first of each is a warm-up, not counted
                # value: the job's command writes into the user's home, bind-mounted at /userhome
                t0 = time.time()
                job = d.submit(v1(f"p8-{i}", STAMP.format(path=f"/userhome/p8-{i}.ts")))
                t_answer = time.time()
                user = user or job.split("~")[0]
                path = d.home / "local" / "users" / user / "home" / f"p8-{i}.ts"
                started = _parse_adjtimex(wait_file(path, timeout=60, poll=0.002, must_contain="return value"))
                state = d.wait(job, timeout=60)
                if state != "SUCCEEDED":
                    raise RuntimeError(f"the docker job {job} ended {state}")
                # baseline: the same image and command from the docker CLI, one bind mount, host network
                b0 = time.time()
                subprocess.run(
                    [
                        "docker",
                        "run",
                        "--rm",
                        "--network",
                        "host",
                        "--label",
                        BENCH_LABEL,
                        "-v",
                        f"{out}:/out",
                        IMAGE,
                        "sh",
                        "-c",
                        STAMP.format(path=f"/out/bare-{i}.ts"),
                    ],
                    check=True,
                    capture_output=True,
                    timeout=60,
                )
                bare = _parse_adjtimex(wait_file(out / f"bare-{i}.ts", must_contain="return value"))
                if i:
                    values.append((started - t0) * 1000)
                    answers.append((t_answer - t0) * 1000)
                    bases.append((bare - b0) * 1000)
    finally:
        remove_containers(bench=True)
    fig.value, fig.baseline = median(values), median(bases)
    fig.ratio = ratio(fig.value, fig.baseline)
    fig.judge(lambda f: f.value - f.baseline <= 100)
    fig.note = (
        f"median of {len(values)} (min {min(values):.0f}, max {max(values):.0f} ms), "
        f"{fig.value - fig.baseline:+.0f} ms over the baseline; the 202 answer came {median(answers):.0f} ms "
        f"after the POST (container created and started inside the request); time taken in the container "
        f"by busybox adjtimex; baseline: `docker run --rm --network host -v DIR:/out {IMAGE} sh -c "
        f"'adjtimex > /out/F'`"
    )
    return fig
