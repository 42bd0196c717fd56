"""Kernels forked from a warm template (issue 69: about 6 s of CPU a chapter): each is
a fresh kernel that runs a notebook as a kernel launched by Jupyter does, and ends
with its template; where a template fails, kernels are launched as Jupyter does."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from markovlib.companion import warm_ipykernel
from markovlib.companion.chapter_runner import quiet_kernel_manager

pytest.importorskip("nbclient")

CELLS = [
    f"import {', '.join(warm_ipykernel.PRELOAD)}\n"
    "print('defined before:', 'x' in globals())\nx = 1",
    "import os, random, signal, sys\n"
    "import matplotlib, matplotlib.pyplot as plt, numpy as np, pandas as pd, torch\n"
    "print(pd.get_option('display.max_columns'), matplotlib.get_backend(),\n"
    "      sys.path[0] == '', os.path.basename(os.getcwd()), os.environ['WARM_TEST'],\n"
    "      torch.get_num_threads(), signal.getsignal(signal.SIGINT).__name__,\n"
    "      type(sys.stdout).__name__, 'JPY_PARENT_PID' in os.environ,\n"
    "      os.environ.get('TORCHINDUCTOR_CACHE_DIR'))",
    "plt.plot([0, 1], [1, 0])\nplt.show()",
    "print(os.getpid(), random.random(), np.random.random(), torch.rand(1).item())",
]


def _run(folder: Path, warm: bool, cells=CELLS) -> tuple[list, str]:
    """The notebook of ``cells`` executed in ``folder``: (its outputs but the last
    cell's, the last cell's text)."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    NotebookClient(
        nb,
        timeout=120,
        kernel_manager_class=quiet_kernel_manager(warm),
        resources={"metadata": {"path": str(folder)}},
    ).execute()
    outputs = [_merged(c.outputs) for c in nb.cells]
    return outputs[:-1], outputs[-1][0][1]


def _merged(outputs) -> list[tuple]:
    """A cell's outputs as (type, text or data keys), a stream's consecutive pieces
    joined (how a print splits into messages depends on when the kernel flushes)."""
    out: list[tuple] = []
    names: list[str | None] = []
    for o in outputs:
        name = o.get("name")
        if o.output_type == "stream" and names and names[-1] == name:
            out[-1] = ("stream", out[-1][1] + o.text)
            continue
        out.append((o.output_type, o.get("text") or sorted(o.get("data", {}))))
        names.append(name)
    return out


def _ended(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_warm_kernel_runs_a_notebook_as_a_launched_one_does(tmp_path, monkeypatch):
    """Two kernels forked from one template print what a launched kernel prints
    (after importing every module the template holds: pandas' kernel display width,
    the inline backend, the kernel's folder, sys.path, environment, torch threads,
    SIGINT's handler, a figure), each in a process of its own under the template,
    with fresh unseeded draws (Python's, numpy's, torch's); closing the template ends
    it and a kernel it still runs, and removes their connection files."""
    monkeypatch.setenv("WARM_TEST", "seen")
    monkeypatch.delenv("PYTEST_CURRENT_TEST")  # a kernel captures its fds without
    # set by torch's dynamo when imported: in the template, passed on to each kernel
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setattr(warm_ipykernel, "_STATE", {})  # this test's templates only
    folder = tmp_path / "chapter"
    folder.mkdir()
    try:
        _compare(folder)
    finally:
        warm_ipykernel.close_templates()


def _compare(folder: Path) -> None:
    """The body of the test above: cold, then warm twice, then a kernel left running
    when the template closes."""
    cold, last0 = _run(folder, warm=False)
    assert cold[1][0][1].split()[:2] == ["20", warm_ipykernel.INLINE]
    printed = cold[1][0][1].split()
    assert printed[-2] == "True" and printed[-1] != "None"
    assert cold[2] == [("display_data", ["image/png", "text/plain"])]
    first, last1 = _run(folder, warm=True)
    second, last2 = _run(folder, warm=True)
    assert first == second == cold
    assert last1.split()[0] != last2.split()[0]  # two processes
    for i in (1, 2, 3):  # unseeded draws differ, as between any two processes
        assert last0.split()[i] != last1.split()[i] != last2.split()[i]
    state = warm_ipykernel._state()
    assert state["usable"], state.get("why")  # the template stood down: why
    (template,) = state["templates"].values()
    km = quiet_kernel_manager(warm=True)(kernel_name="python3")
    asyncio.run(km.start_kernel(cwd=str(folder)))  # left running
    kernel = psutil.Process(km.provisioner.pid)
    assert kernel.parent().pid == template.process.pid
    connection = Path(km.connection_file)
    assert connection.is_file()
    warm_ipykernel.close_templates()
    assert template.process.poll() is not None
    deadline = time.monotonic() + 10
    while not _ended(kernel):
        assert time.monotonic() < deadline, "the kernel outlived its template"
        time.sleep(0.05)
    assert not connection.parent.exists()


def test_a_failed_template_leaves_kernels_to_jupyter(tmp_path, monkeypatch):
    """A template that does not answer: the kernel is launched as Jupyter does, in the
    connection file already written, and so is every later kernel of the process;
    another command than ``python -m ipykernel_launcher`` is never forked."""

    def fails(*_):
        raise TimeoutError("no answer")

    monkeypatch.setattr(warm_ipykernel, "_STATE", {})  # this test's process state
    monkeypatch.setattr(warm_ipykernel._Template, "fork", fails)
    cells = ["import os\nprint(os.path.basename(os.getcwd()))", "print(1)"]
    for _ in range(2):
        outputs, last = _run(tmp_path, warm=True, cells=cells)
        assert outputs == [[("stream", f"{tmp_path.name}\n")]] and last == "1\n"
        assert not warm_ipykernel._state()["usable"]
        assert not warm_ipykernel._state()["templates"]
    warm_ipykernel.close_templates()
    assert warm_ipykernel._kernel_command(["python", "-c", "pass"]) is None
    assert warm_ipykernel._kernel_command(["python", "-m", "other", "-f", "c"]) is None
    assert warm_ipykernel._kernel_command(
        ["/venv/python", "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "c"]
    ) == (["/venv/python", "-Xfrozen_modules=off"], ["-f", "c"])
