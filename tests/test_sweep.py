"""The result store and sweeps: nothing lost, nothing recomputed, interrupted runs
resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import inprocess
import numpy as np
import pandas as pd
import pytest
import torch

from markovlib.chains import binary
from markovlib.model import TransformerConfig
from markovlib.runs.spec import RunSpec, grid, make_chain
from markovlib.runs.store import ResultStore
from markovlib.runs.sweep import sweep
from markovlib.train import Execution, TrainConfig, train

ROOT = Path(__file__).resolve().parents[1]

TINY = dict(steps=6, batch_size=2, seq_len=16, eval_every=3, eval_batches=1)


def test_spec_key_is_stable_and_specific():
    a = grid(
        [0.2], [0.3], tied=[True], seeds=[0], config_kwargs=dict(max_len=32), **TINY
    )[0]
    b = grid(
        [0.2], [0.3], tied=[True], seeds=[0], config_kwargs=dict(max_len=32), **TINY
    )[0]
    assert a.key == b.key and len(a.key) == 20
    others = [
        grid(
            [0.2],
            [0.3],
            tied=[False],
            seeds=[0],
            config_kwargs=dict(max_len=32),
            **TINY,
        )[0],
        grid(
            [0.2], [0.3], tied=[True], seeds=[1], config_kwargs=dict(max_len=32), **TINY
        )[0],
        grid(
            [0.2], [0.4], tied=[True], seeds=[0], config_kwargs=dict(max_len=32), **TINY
        )[0],
        grid(
            [0.2],
            [0.3],
            tied=[True],
            seeds=[0],
            config_kwargs=dict(max_len=32),
            **{**TINY, "steps": 7},
        )[0],
    ]
    assert len({a.key, *(o.key for o in others)}) == 5


def test_grid_validates():
    with pytest.raises(ValueError, match="^p"):
        grid([1.2], [0.3], **TINY)
    with pytest.raises(ValueError, match="unknown training settings"):
        grid([0.2], [0.3], epochs=3)
    with pytest.raises(ValueError, match="kind"):
        make_chain({"kind": "ternary"})


def test_sweep_stores_what_train_computes_and_skips_it_next_time(tmp_path, monkeypatch):
    specs = grid(
        [0.2, 0.6],
        [0.3],
        tied=[True, False],
        seeds=[0, 1],
        config_kwargs=dict(max_len=32),
        **TINY,
    )
    frame = sweep(specs, tmp_path, ensemble_size=3, device="cpu", progress=False)
    assert len(frame) == len(specs) == 8 and set(frame["key"]) == {s.key for s in specs}
    # a stored run equals a single train() with the same chain, config and seed
    spec = specs[5]
    single = train(
        make_chain(spec.chain),
        spec.config,
        spec.train,
        seed=spec.seed,
        execution=Execution(device="cpu", progress=False),
    )
    row = frame.set_index("key").loc[spec.key]
    assert row["final_test_loss"] == pytest.approx(single.final_test_loss, abs=2e-5)
    assert row["entropy_rate"] == pytest.approx(
        binary(spec.chain["p"], spec.chain["q"]).entropy_rate()
    )
    stored = ResultStore(tmp_path).history(spec.key)
    pd.testing.assert_frame_equal(
        stored, single.history, check_exact=False, atol=2e-5, rtol=0, check_dtype=False
    )
    # second run: nothing is trained again
    monkeypatch.setattr(
        "markovlib.runs.spec.train_many",
        lambda *a, **k: pytest.fail("re-trained a stored run"),
    )
    again = sweep(specs, tmp_path, ensemble_size=3, device="cpu", progress=False)
    pd.testing.assert_frame_equal(again, frame)


@pytest.mark.parametrize(
    "sig, workers",
    [(signal.SIGTERM, "1"), (signal.SIGINT, "1"), (signal.SIGINT, "2")],
    ids=["SIGTERM", "SIGINT", "SIGINT-two-workers"],
)
def test_interrupted_sweep_loses_nothing_and_resumes(tmp_path, sig, workers):
    results = tmp_path / "results"
    cmd = [
        sys.executable,
        "-m",
        "markovlib",
        "sweep",
        "--p",
        "0.2,0.5,0.8",
        "--q",
        "0.3,0.7",
        "--tied",
        "both",
        "--seeds",
        "1",
        "--steps",
        "40",
        "--batch-size",
        "4",  # issue 51: 8 x 128 before; a run still lasts a few tenths of a second
        "--seq-len",
        "64",
        "--ensemble-size",
        "1",
        "--scale",
        "smoke",
        "--device",
        "cpu",
        "--results",
        str(results),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MARKOVLIB_WORKERS": workers}
    # a terminal's Ctrl-C: SIGINT at its default disposition in the child, even when
    # this test itself runs as a background job of a non-interactive shell (which starts
    # with SIGINT ignored, and Python keeps it ignored)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    store_file = results / "runs.sqlite"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if store_file.exists() and len(ResultStore(results)) >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep finished before it could be interrupted"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    # one line: no warning of the workers' leaked semaphores after it (tqdm's lock in
    # each worker, two lines from Python's resource tracker before the fix)
    assert "interrupted" in err and "re-run" in err and err.count("\n") == 1, err
    first = ResultStore(results).frame()
    assert 2 <= len(first) < 12
    if workers == "2" or sig != signal.SIGINT:
        return  # the store they leave is read above; one case resumes it (issue 51)
    # re-run: only the rest is trained, the finished rows are kept as they were
    done = inprocess.run(*cmd[3:], env=env)  # issue 51: the resume needs no interpreter
    assert done.returncode == 0, done.stderr
    assert f"({12 - len(first)} new)" in done.stdout
    final = ResultStore(results).frame().set_index("key")
    assert len(final) == 12
    kept = final.loc[first["key"]]
    assert list(kept["created"]) == list(first["created"])


def test_sweep_results_reload_models_equal_to_fresh_training(tmp_path, monkeypatch):
    from markovlib.runs.sweep import sweep_results

    specs = grid(
        [0.2],
        [0.3],
        tied=[True, False],
        seeds=[4],
        config_kwargs=dict(max_len=32),
        **TINY,
    )
    loaded = sweep_results(
        specs, tmp_path, ensemble_size=2, device="cpu", progress=False
    )
    for spec, result in zip(specs, loaded):
        fresh = train(
            make_chain(spec.chain),
            spec.config,
            spec.train,
            seed=spec.seed,
            execution=Execution(device="cpu", progress=False),
        )
        assert result.test_seed == fresh.test_seed and result.seed == fresh.seed
        assert torch.equal(result.test_sequence(16), fresh.test_sequence(16))
        for p, q in zip(result.model.parameters(), fresh.model.parameters()):
            torch.testing.assert_close(p, q, atol=2e-5, rtol=0)
        if spec.config.tied:
            assert result.model.head.weight is result.model.wte.weight
        np.testing.assert_allclose(
            result.learnt_kernel(), fresh.learnt_kernel(), atol=1e-4
        )
    # loading again trains nothing
    monkeypatch.setattr(
        "markovlib.runs.spec.train_many",
        lambda *a, **k: pytest.fail("re-trained a stored run"),
    )
    again = sweep_results(specs, tmp_path, device="cpu", progress=False)
    for a, b in zip(again, loaded):
        pd.testing.assert_frame_equal(a.history, b.history)


def test_chain_grid_builds_k_state_specs_and_matches_grid():
    from markovlib.runs.spec import chain_grid

    specs = chain_grid(
        [
            {"kind": "symmetric", "k": 5, "p": 0.6},
            {"kind": "binary", "p": 0.2, "q": 0.3},
        ],
        tied=[True, False],
        seeds=[0, 1],
        preset="theory",
        config_kwargs=dict(max_len=32),
        **TINY,
    )
    assert len(specs) == 8
    assert [s.config.vocab_size for s in specs[:4]] == [5, 5, 2, 2]
    assert (
        all(not s.config.layer_norm for s in specs)
        and [s.config.tied for s in specs] == [True] * 4 + [False] * 4
    )
    binary_specs = [s for s in specs if s.chain["kind"] == "binary"]
    assert [s.key for s in binary_specs] == [
        s.key
        for s in grid(
            [0.2],
            [0.3],
            seeds=[0, 1],
            preset="theory",
            config_kwargs=dict(max_len=32),
            **TINY,
        )
    ]
    with pytest.raises(ValueError, match="preset"):
        chain_grid([{"kind": "binary", "p": 0.2, "q": 0.3}], preset="bert")
    with pytest.raises(ValueError, match="unknown training settings"):
        chain_grid([{"kind": "binary", "p": 0.2, "q": 0.3}], epochs=3)


def test_higher_order_chains_run_through_the_store(tmp_path):
    from markovlib.chains import lag_switching, random_kth_order
    from markovlib.runs.spec import chain_grid
    from markovlib.runs.sweep import sweep_results

    lag = make_chain({"kind": "lag", "order": 2, "p": 0.5, "q": 0.8})
    assert lag.entropy_rate() == pytest.approx(
        lag_switching(2, 0.5, 0.8).entropy_rate()
    )
    rnd = make_chain({"kind": "random", "order": 2, "k": 3, "alpha": 0.5, "seed": 1})
    np.testing.assert_array_equal(rnd.P, random_kth_order(2, 3, alpha=0.5, seed=1).P)
    specs = chain_grid(
        [{"kind": "lag", "order": 2, "p": 0.5, "q": 0.8}],
        tied=[True],
        seeds=[0, 1],
        config_kwargs=dict(max_len=32, window=1),
        **TINY,
    )
    results = sweep_results(
        specs, tmp_path, ensemble_size=2, device="cpu", progress=False
    )
    assert [r.config.window for r in results] == [1, 1] and all(
        r.chain.order == 2 for r in results
    )
    assert all(np.isfinite(r.test_history["test_loss"]).all() for r in results)
    frame = ResultStore(tmp_path).frame()
    assert (
        set(frame["chain.kind"]) == {"lag"}
        and (frame["entropy_rate"] == lag.entropy_rate()).all()
    )


def test_a_sweep_says_how_many_runs_it_will_train_before_it_trains(tmp_path, capsys):
    specs = grid([0.2, 0.6], [0.3], tied=[True], seeds=[0, 1], **TINY)
    specs += grid(
        [0.2],
        [0.3],
        tied=[True],
        seeds=[0],
        steps=4,
        batch_size=2,
        seq_len=8,
        eval_every=2,
        eval_batches=1,
    )
    sweep(specs, tmp_path, ensemble_size=3, device="cpu", progress=True)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "markovlib:" in ln]
    assert lines == [
        "markovlib: training 5 runs (4 runs of 6 steps, batch 2 × length 16, "
        "1 run of 4 steps, batch 2 × length 8) in 3 ensembles on cpu, under a "
        "second on one CPU thread: neither shipped nor "
        f"stored in {tmp_path / 'runs.sqlite'}"
    ]
    sweep(specs, tmp_path, ensemble_size=3, device="cpu", progress=True)
    assert "markovlib: training" not in capsys.readouterr().err  # all stored


TABLES = {"AMD_EPYC": 1.4, "INTEL_XEON": 1.45}  # each table: its fit's widest miss


@pytest.mark.parametrize("name", TABLES)
def test_the_estimate_follows_every_measured_step(name):
    """Each CPU kind's table against benchmarks/step_cost.py's measurements on it (one
    thread; GPT-2 and theory models, uni-embedding at d 4, fp32 and fp16, lengths
    128-1024, ensembles of 1-12): each within the factor its fit left (AMD EPYC 1.28,
    Intel Xeon 1.42), the median within a tenth; and the line a sweep prints for Fig
    3(a)'s 8 fp16 runs by the AMD EPYC's table."""
    from markovlib.runs import sweep as S
    from markovlib.runs.experiments import paper_edition

    table, bound = getattr(S, name), TABLES[name]
    rows = json.loads((ROOT / "benchmarks/results" / table.costs).read_text())["rows"]
    assert len(rows) >= 30
    ratios = []
    for row in rows:
        config = TransformerConfig(**row["config"])
        train = TrainConfig(
            steps=1, batch_size=16, seq_len=row["length"], precision=row["precision"]
        )
        spec = RunSpec({"kind": "binary", "p": 0.3, "q": 0.9}, config, train, seed=0)
        ratios.append(
            S.estimate_seconds([spec] * row["n"], 1, table=table) / row["seconds"]
        )
        assert 1 / bound < ratios[-1] < bound, row
    assert 0.9 < np.median(ratios) < 1.1
    specs = dict(paper_edition())["trap400-gpt2-tied-fp16"][:8]
    note = S.training_note(specs, 1, "cpu", "results")
    assert note.startswith("markovlib: training 8 runs (400 steps, batch 16")
    assert "on cpu, about 21 min on one CPU thread: neither shipped nor" in note


def test_two_worker_processes_train_the_runs_one_process_trains(
    tmp_path, capsys, monkeypatch
):
    """workers=2 (a reader's re-run on both cores): the same ensembles trained in two
    spawned processes of one torch thread give the runs of one process bit for bit,
    and the bar counts every run with the time left (the estimate by the AMD EPYC's
    table: $MARKOVLIB_CPU_SPEED=1)."""
    monkeypatch.setenv("MARKOVLIB_CPU_SPEED", "1")
    specs = grid([0.2, 0.6], [0.3], tied=[True], seeds=range(8), **TINY)
    from markovlib.runs.executors import pool_started

    one = sweep(specs, tmp_path / "one", ensemble_size=8, device="cpu", progress=False)
    wait = "under a second" if pool_started(2) else "about 8 s"  # the pool's start
    two = sweep(
        specs, tmp_path / "two", ensemble_size=8, device="cpu", workers=2, progress=True
    )
    err = capsys.readouterr().err
    assert f"in 2 ensembles on cpu, {wait} on 2 CPU processes" in err
    assert "16.0/16 runs" in err
    a, b = ResultStore(tmp_path / "one"), ResultStore(tmp_path / "two")
    assert sorted(one["key"]) == sorted(two["key"]) == sorted(s.key for s in specs)
    for s in specs:
        ra, rb = a.load(s), b.load(s)
        assert ra.history["test_loss"].equals(rb.history["test_loss"])
        for (n, x), (_, y) in zip(
            ra.model.state_dict().items(), rb.model.state_dict().items()
        ):
            assert torch.equal(x, y), n


def test_makespan_gives_each_ensemble_to_the_least_loaded_worker():
    from markovlib.runs.sweep import AMD_EPYC, estimate_seconds, makespan

    ENSEMBLE_SECONDS = AMD_EPYC.ensemble_seconds
    POOL_START_SECONDS = AMD_EPYC.pool_start_seconds

    specs = grid([0.2], [0.3], tied=[True], seeds=range(12), **TINY)
    chunks = [specs[:6], specs[6:9], specs[9:]]  # costs 6 : 3 : 3 (about)
    big, small = estimate_seconds(specs[:6], 1), estimate_seconds(specs[6:9], 1)
    big, small = big + ENSEMBLE_SECONDS, small + ENSEMBLE_SECONDS
    assert makespan(chunks, 2) == pytest.approx(max(big, 2 * small))
    assert makespan(chunks, 1) == pytest.approx(big + 2 * small)
    assert makespan(chunks, 3) == pytest.approx(big)
    cold = makespan(chunks, 3, pool_started=False)
    assert cold == pytest.approx(big + POOL_START_SECONDS)


def test_the_estimate_is_timed_on_this_cpu(monkeypatch):
    """A sweep's estimate scales the table by the first steps of its largest
    ensemble of each group, timed here on one thread: a probe that took
    twice the table's time doubles the estimate of its runs and leaves the others'; one
    probe per group and size in a process; the thread count is given back;
    $MARKOVLIB_CPU_SPEED fixes the factor, and a bad one is refused in one line."""
    from markovlib.runs import sweep as S

    monkeypatch.delenv(S.SPEED_VAR, raising=False)
    monkeypatch.setattr(S, "_SPEEDS", {})
    sizes = dict(steps=400, batch_size=16, tied=[True])
    long = grid([0.2], [0.3], seeds=range(8), seq_len=256, **sizes)
    short = grid([0.2], [0.3], seeds=range(4), seq_len=128, **sizes)
    chunks = [long[:4], long[4:], short]
    now, trained = [0.0], []
    monkeypatch.setattr(S, "perf_counter", lambda: now[0])

    def timed_train(specs, *, device, stop_after, on_step):
        trained.append((specs[0].train.seq_len, len(specs), stop_after))
        assert device == "cpu" and torch.get_num_threads() == 1
        slower = 2.0 if specs[0].train.seq_len == 256 else 1.0
        for step in range(1, stop_after + 1):
            now[0] += slower * S.estimate_seconds(specs, 1) / 400
            on_step(step)

    monkeypatch.setattr(S, "train_specs", timed_train)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        speed = S.cpu_speed(chunks)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    slow, fast = S._kind(long[0]), S._kind(short[0])
    assert speed == pytest.approx({slow: 2.0, fast: 1.0})
    steps = S.PROBE_WARMUP + S.PROBE_STEPS
    assert trained == [(256, 4, steps), (128, 4, steps)]
    assert S.cpu_speed(chunks) == speed and len(trained) == 2  # once a process
    each = sum(S.estimate_seconds(c, 1) * f for c, f in zip(chunks, (2, 2, 1)))
    assert S.makespan(chunks, 1, False, speed) == pytest.approx(
        each + 3 * S.AMD_EPYC.ensemble_seconds + S.AMD_EPYC.pool_start_seconds
    )
    monkeypatch.setenv(S.SPEED_VAR, "3")
    assert S.cpu_speed(chunks) == {slow: 3.0, fast: 3.0}
    monkeypatch.setenv(S.SPEED_VAR, "fast")
    with pytest.raises(ValueError, match="MARKOVLIB_CPU_SPEED: must be a finite nu"):
        S.cpu_speed(chunks)
    assert len(trained) == 2


@pytest.mark.parametrize("name", TABLES)
def test_fixed_seconds_are_those_measured(name):
    """Each table's fixed seconds round benchmarks/step_cost.py --fixed on its CPU."""
    from markovlib.runs import sweep as S

    table = getattr(S, name)
    found = json.loads((ROOT / "benchmarks/results" / table.fixed).read_text())
    assert table.ensemble_seconds == pytest.approx(found["ensemble_seconds"], rel=0.2)
    assert table.pool_start_seconds == pytest.approx(
        found["pool_start_seconds"], rel=0.1
    )


def test_a_cpu_of_a_measured_kind_reads_its_table(monkeypatch):
    """The CPU's model name and flags pick its table (no probe then); another CPU gets
    none (and is probed); /proc/cpuinfo as an Intel Xeon and an AMD EPYC show it."""
    from markovlib.runs import sweep as S

    def cpu(name: str, flags: str) -> S.CpuTable | None:
        info = f"processor : 0\nmodel name : {name}\nflags : fpu {flags} sse\n"
        monkeypatch.setattr(S.Path, "read_text", lambda self: info)
        S.this_cpu_table.cache_clear()
        try:
            return S.this_cpu_table()
        finally:
            S.this_cpu_table.cache_clear()

    assert cpu("Intel(R) Xeon(R) Processor", "avx2 amx_tile avx512_fp16") is (
        S.INTEL_XEON
    )
    assert cpu("Intel(R) Xeon(R) Processor", "avx2") is None  # no AMX: another Xeon
    assert cpu("AMD EPYC 7B13 64-Core Processor", "avx2") is S.AMD_EPYC
    assert cpu("Apple M2", "") is None
    monkeypatch.setattr(S, "this_cpu_table", lambda: S.INTEL_XEON)
    monkeypatch.setattr(S, "_probe", lambda specs: pytest.fail("probed"))
    sizes = dict(steps=400, batch_size=16, seq_len=256)
    specs = grid([0.2], [0.3], tied=[True], seeds=range(8), **sizes)
    chunks = [specs[:4], specs[4:]]
    note = S._cpu_estimate(specs, 2, "cpu", 2, chunks)
    started = S.pool_started(2) or not S.pooled(2, 2)
    seconds = S.makespan(chunks, 2, started, None, S.INTEL_XEON)
    assert f"about {S._duration(seconds)} on 2 CPU processes" in note


def test_workers_share_the_runs_in_ensembles_of_at_least_four():
    from markovlib.runs.sweep import _shared

    specs = grid([0.2], [0.3], tied=[True], seeds=range(32), **TINY)
    assert _shared(specs, 32, 2, "local") == 16
    assert _shared(specs[:12], 32, 2, "local") == 6
    assert _shared(specs[:6], 32, 2, "local") == 4  # not 3: ensembles stay efficient
    assert _shared(specs, 32, 1, "local") == 32
    assert _shared(specs, 32, 2, "ray") == 32
    two = grid([0.2], [0.3], tied=[True, False], seeds=range(6), **TINY)
    assert _shared(two, 32, 2, "local") == 6  # a group per worker: none is cut
    assert _shared(two, 32, 4, "local") == 4  # two ensembles per group


def test_a_stop_while_the_pool_is_waited_on_is_held_then_given_to_the_old_handler():
    """CI, 2026-11-29: a Ctrl-C raised inside the pool's ``wait`` can leave a future's
    lock taken and the process hung at exit; the signal is held there and delivered
    on leaving, to the handler that was installed before (here a chapter's own)."""
    from markovlib.runs.executors import _HeldSignals

    got = []
    chapter = lambda s, f: got.append(s)  # noqa: E731
    previous = signal.signal(signal.SIGTERM, chapter)
    ctrl_c = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with _HeldSignals():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)  # a Python handler would have run by now
            assert got == []
        assert got == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is chapter
        with pytest.raises(KeyboardInterrupt):
            with _HeldSignals():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.01)
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, ctrl_c)


def test_a_width_no_table_was_measured_at_is_probed_on_a_cpu_with_a_table(monkeypatch):
    """The tables were measured at d = 8: the in-context chapter's d = 16 runs took 2.2
    times their table estimate (rerun at cpu, AMD EPYC, 2026-11-29). A group of another
    width is probed, its factor carried onto this CPU's table; a group at d = 8 is not,
    nor a group the table gives under PROBE_WORTH seconds (smoke)."""
    from markovlib.runs import sweep as S

    monkeypatch.delenv(S.SPEED_VAR, raising=False)
    monkeypatch.setattr(S, "this_cpu_table", lambda: S.INTEL_XEON)
    probed = []
    monkeypatch.setattr(
        S, "_probe", lambda specs: probed.append(specs[0].config.d_model) or 2.0
    )
    sizes = dict(tied=[True], seeds=range(4), steps=4000, batch_size=16, seq_len=256)
    wide = grid([0.2], [0.3], config_kwargs=dict(d_model=16), **sizes)
    narrow = grid([0.2], [0.3], **sizes)
    note = S._cpu_estimate(wide + narrow, 2, "cpu", 1, [wide, narrow])
    assert probed == [16]
    on_xeon = S._run_step_seconds(wide[0]) / S._run_step_seconds(wide[0], S.INTEL_XEON)
    speed = {S._kind(wide[0]): 2.0 * on_xeon}
    seconds = S.makespan([wide, narrow], 1, True, speed, S.INTEL_XEON)
    assert seconds > S.makespan([wide, narrow], 1, True, None, S.INTEL_XEON)
    assert f"about {S._duration(seconds)} on one CPU thread" in note
    small = grid([0.2], [0.3], config_kwargs=dict(d_model=16), **TINY)
    S._cpu_estimate(small, 1, "cpu", 1, [small])
    S._cpu_estimate(wide, 1, "cpu", 1, [wide], executor="ray")  # the cluster's work
    assert probed == [16]
    # a CPU of no table, or a fixed speed: every group by that, none probed for width
    monkeypatch.setenv(S.SPEED_VAR, "1.5")
    note = S._cpu_estimate(wide, 1, "cpu", 1, [wide])
    fixed = S.makespan([wide], 1, True, {S._kind(wide[0]): 1.5}, S.AMD_EPYC)
    assert f"about {S._duration(fixed)} on one CPU thread" in note and probed == [16]
    monkeypatch.delenv(S.SPEED_VAR)
    # a probe's factor is on the AMD EPYC's table: 1.0 there is that table's estimate
    monkeypatch.setattr(S, "this_cpu_table", lambda: S.AMD_EPYC)
    monkeypatch.setattr(S, "_probe", lambda specs: 1.0)
    table = S.makespan([wide], 1, True, None, S.AMD_EPYC)
    note = S._cpu_estimate(wide, 1, "cpu", 1, [wide])
    assert f"about {S._duration(table)} on one CPU thread" in note


def test_a_worker_killed_mid_ensemble_ends_the_sweep_in_one_line(tmp_path, monkeypatch):
    """A sweep's worker process killed while it trains (kill -9, or for want of
    memory) ends the sweep with WorkerLost, whose one line says what to do (it was
    BrokenProcessPool's traceback), and the broken pool is not kept for the session's
    next sweep (nor one whose idle worker died); the command says it in one line with
    what is stored."""
    from markovlib.runs import executors

    kw = dict(steps=5000, batch_size=2, seq_len=16, eval_every=5000, eval_batches=1)
    specs = grid([0.2], [0.3], tied=[True], seeds=[0, 1], **kw)
    reports = []

    def kill_at_first_report(n: float) -> None:  # a worker trains now
        if not reports:
            pool = executors._POOLS[1][0]
            os.kill(next(iter(pool._processes)), signal.SIGKILL)
        reports.append(n)

    chunks = [specs[:1], specs[1:]]
    trained = executors._pool_chunks(chunks, 1, None, kill_at_first_report)
    with pytest.raises(executors.WorkerLost, match=r"\(\$MARKOVLIB_WORKERS=1\)"):
        list(trained)
    assert reports and 1 not in executors._POOLS
    pool = executors._pool(1)[0]  # a kept pool whose idle worker died: broken at once
    pool.submit(int).result(timeout=120)
    os.kill(next(iter(pool._processes)), signal.SIGKILL)
    deadline = time.time() + 60
    while not pool._broken and time.time() < deadline:
        time.sleep(0.05)
    with pytest.raises(executors.WorkerLost):
        list(executors._pool_chunks(chunks, 1, None, None))  # at its submit
    assert 1 not in executors._POOLS

    def lost(*args):
        raise executors.WorkerLost(executors.LOST)

    monkeypatch.setattr("markovlib.cli.sweep.sweep_into", lost)
    out = inprocess.run("sweep", "--p", "0.2", "--q", "0.3", "--results", tmp_path)
    assert out.returncode == 1 and out.stderr == (
        f"markovlib sweep: error: {executors.LOST}; 0 runs stored in "
        f"{tmp_path / 'runs.sqlite'} (0 new)\n"
    )
