"""Kernels forked from a warm template (issue 69: about 6 s of CPU a chapter): each is
a fresh kernel that runs a notebook as a kernel launched by Jupyter does, and ends
with its template."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from markovlib.companion import warm_ipykernel
from markovlib.companion.chapter_runner import quiet_kernel_manager

pytest.importorskip("nbclient")

CELLS = [
    "import os, random, signal, sys\n"
    "import matplotlib, matplotlib.pyplot as plt, numpy as np, pandas as pd, torch\n"
    "print('defined before:', 'x' in globals())\nx = 1",
    "print(pd.get_option('display.max_columns'), matplotlib.get_backend(),\n"
    "      sys.path[0] == '', os.path.basename(os.getcwd()), os.environ['WARM_TEST'],\n"
    "      torch.get_num_threads(), getattr(signal.getsignal(signal.SIGINT),\n"
    "      '__name__', signal.getsignal(signal.SIGINT)), type(sys.stdout).__name__)",
    "plt.plot([0, 1], [1, 0])\nplt.show()",
    "print(os.getpid(), random.random(), np.random.random())",
]


def _run(folder: Path, warm: bool) -> tuple[list, str]:
    """The notebook of CELLS executed in ``folder``: (its outputs but the last
    cell's, the last cell's text)."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_manager_class=quiet_kernel_manager(warm),
        resources={"metadata": {"path": str(folder)}},
    )
    client.execute()
    outputs = [
        [(o.output_type, o.get("text") or sorted(o.get("data", {}))) for o in c.outputs]
        for c in nb.cells
    ]
    return outputs[:-1], outputs[-1][0][1]


def test_a_warm_kernel_runs_a_notebook_as_a_launched_one_does(tmp_path, monkeypatch):
    """Two kernels forked from one template print what a launched kernel prints
    (pandas' kernel display width, the inline backend, the kernel's folder, sys.path,
    environment, torch threads, SIGINT's handler, a figure), each in a process of its
    own under the template with fresh unseeded draws; closing the template ends it
    and a kernel it still runs, and removes their connection files."""
    monkeypatch.setenv("WARM_TEST", "seen")
    folder = tmp_path / "chapter"
    folder.mkdir()
    cold, _ = _run(folder, warm=False)
    assert cold[1][0][1].split()[:2] == [
        "20",
        "module://matplotlib_inline.backend_inline",
    ]
    assert cold[2] == [("display_data", ["image/png", "text/plain"])]
    first, last1 = _run(folder, warm=True)
    second, last2 = _run(folder, warm=True)
    assert first == second == cold
    assert last1.split()[0] != last2.split()[0]  # two processes
    assert last1.split()[1:] != last2.split()[1:]  # unseeded draws differ
    (template,) = warm_ipykernel._TEMPLATES.values()
    km = quiet_kernel_manager(warm=True)(kernel_name="python3")
    asyncio.run(km.start_kernel(cwd=str(folder)))  # left running
    kernel = psutil.Process(km.provisioner.pid)
    assert kernel.parent().pid == template.process.pid
    assert "markovlib.companion.warm_ipykernel" in template.process.args
    connection = Path(km.connection_file)
    assert connection.is_file()
    warm_ipykernel.close_templates()
    assert template.process.poll() is not None
    deadline = time.monotonic() + 10
    while kernel.is_running() and kernel.status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the kernel outlived its template"
        time.sleep(0.05)
    assert not connection.parent.exists()


def test_only_ipykernels_command_is_forked():
    """Another command than ``python -m ipykernel_launcher`` is launched by Jupyter."""
    assert warm_ipykernel.fork_kernel(["python", "-c", "pass"], {}) is None
    assert warm_ipykernel._kernel_command(
        ["/venv/python", "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", "c"]
    ) == (["/venv/python", "-Xfrozen_modules=off"], ["-f", "c"])
    assert os.environ.get("MARKOVLIB_NO_SUCH") is None
