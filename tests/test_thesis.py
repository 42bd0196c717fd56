"""Issue 66, the paper's thesis judged: the curvature at a point (Lanczos against the
exact Hessian and Thm 2/3's closed forms), training continued from a stored run's
weights (keys, starting point, through a sweep), and the rules of the thesis' rows."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from made_up_runs import at_chain, at_marginal

from markovlib import analysis, curvature, theory
from markovlib._checks import seeded
from markovlib.chains import binary
from markovlib.companion import thesis
from markovlib.model import Transformer, TransformerConfig
from markovlib.runs import derived as D
from markovlib.runs.shipped import source_weights
from markovlib.runs.spec import RunSpec, continued, grid, start_weights
from markovlib.runs.store import ResultStore
from markovlib.runs.sweep import sweep_results

TRAP = binary(0.5, 0.8)


def test_lanczos_finds_the_extreme_eigenvalues_of_a_symmetric_matrix():
    A = np.random.default_rng(0).standard_normal((300, 300))
    A = torch.as_tensor((A + A.T) / 2)
    ritz, residuals = curvature.lanczos(lambda v: A @ v, 300, iterations=80)
    exact = np.linalg.eigvalsh(A.numpy())
    assert ritz[0] == pytest.approx(exact[0], abs=1e-6)
    assert ritz[-1] == pytest.approx(exact[-1], abs=1e-6)
    assert residuals[0] < 1e-4 and (ritz >= exact[0] - 1e-9).all()


@pytest.mark.parametrize("tied", [True, False])
def test_curvature_at_theta_pi_is_the_exact_hessians_and_the_closed_form(tied):
    """Thm 2 (tied: no negative direction, the (e, b) block positive) and Thm 3
    (untied: -2|c| over every parameter of the two-logit model, the paper's -|c| in
    the relative coordinates e_1 - e_0)."""
    model = thesis._theta_pi(TRAP, TransformerConfig.theory(tied=tied, max_len=4))
    H, _ = theory.hessian(model, TRAP, 4)
    exact = np.linalg.eigvalsh(H)
    loss = theory.exact_loss_function(model, TRAP, 4)
    params = {n: p.detach() for n, p in model.named_parameters()}
    c = curvature.curvature(loss, params, iterations=60)
    assert c.grad_norm < 1e-12 and c.loss == pytest.approx(TRAP.unigram_entropy())
    assert c.min_eigenvalue == pytest.approx(exact[0], abs=1e-10)
    assert c.max_eigenvalue == pytest.approx(exact[-1], abs=1e-10)
    closed = theory.unigram_curvature(TRAP, tied=tied)
    if tied:
        assert abs(c.min_eigenvalue) < 1e-12  # flat directions only, no negative one
    else:
        assert c.min_eigenvalue == pytest.approx(2 * closed, rel=1e-9)
        assert thesis.saddle_scale(TRAP) == pytest.approx(-2 * closed, rel=1e-9)


def test_trap_curvature_reads_a_state_dict_and_finds_thm3s_saddle_untied():
    """At the tied θ_π the batch Hessian's negative part is sampling noise, which the
    fresh paths do not confirm (GPT-2's smallest Ritz value on the fixed batch lies
    under the rule's line: the rule of 2026-11-28 flagged it); at the untied θ_π Thm
    3's negative direction, which they do."""
    line = -thesis.NEGATIVE_BELOW * thesis.saddle_scale(TRAP)
    for preset, tied in (("theory", True), ("theory", False), ("gpt2", True)):
        config = getattr(TransformerConfig, preset)(tied=tied, max_len=32)
        state = theory.unigram_point(TRAP, config).state_dict()
        c = curvature.trap_curvature(
            config, TRAP, state, batch=64, length=32, fresh_batch=256
        )
        assert (c.held_out >= line) == tied, (preset, tied, c.held_out)
        if preset == "gpt2":
            assert c.min_eigenvalue < line < 0 < c.held_out


def test_the_held_out_curvature_is_the_mean_over_the_fresh_losses_along_v():
    """vᵀ B v averaged over the held-out losses, v the smallest Ritz vector of the
    first loss; fresh paths taken a batch at a time give the whole batch's value."""
    rng = np.random.default_rng(1)
    A, B1, B2 = (torch.as_tensor(rng.standard_normal((6, 6))) for _ in range(3))
    A, B1, B2 = (M + M.T for M in (A, B1, B2))

    def quadratic(M):
        return lambda p: 0.5 * p["x"] @ M @ p["x"]

    params = {"x": torch.zeros(6, dtype=torch.float64)}
    c = curvature.curvature(
        quadratic(A), params, iterations=6, held_out=[quadratic(B1), quadratic(B2)]
    )
    v = torch.as_tensor(np.linalg.eigh(A.numpy())[1][:, 0])
    each = [float(v @ B @ v) for B in (B1, B2)]
    assert c.held_out == pytest.approx(np.mean(each), abs=1e-10)
    assert c.held_out_se == pytest.approx(abs(each[0] - each[1]) / 2, abs=1e-10)
    config = TransformerConfig.theory(tied=True, max_len=16)
    torch.manual_seed(0)
    model = Transformer(config).double().eval()
    state = model.state_dict()
    params = {n: p.detach() for n, p in model.named_parameters()}
    x, y = (TRAP.sample(b, 16, generator=seeded(s)) for b, s in ((8, 0), (16, 1)))
    loss = curvature.batch_loss_function
    whole = curvature.curvature(
        loss(model, x), params, iterations=6, held_out=[loss(model, y)]
    )
    kw = dict(batch=8, length=16, iterations=6)
    parts = curvature.trap_curvature(config, TRAP, state, **kw, fresh_batch=16)
    assert parts.held_out == pytest.approx(whole.held_out, abs=1e-12)
    assert parts.min_eigenvalue == pytest.approx(whole.min_eigenvalue, abs=1e-12)
    with pytest.raises(ValueError, match="multiple"):
        curvature.trap_curvature(config, TRAP, state, **kw, fresh_batch=12)


def _spec(seed=0, **kw):
    settings = dict(steps=6, batch_size=2, seq_len=16, eval_every=3)
    return grid(
        [0.5], [0.8], tied=[True], seeds=[seed], preset="theory", **settings, **kw
    )[0]


def test_a_continued_run_names_its_source_and_starts_at_its_weights(tmp_path):
    source = _spec()
    again = continued(source, "fp32", 100)
    assert again.init == {"kind": "run", "key": source.key} and again.seed == 100
    assert RunSpec.from_dict(again.as_dict()).key == again.key != source.key
    with pytest.raises(ValueError, match="whose weights were not given"):
        start_weights(again)
    with pytest.raises(ValueError, match="20 hex digits"):
        RunSpec(source.chain, source.config, source.train, 1, {"kind": "run", "key": 1})
    # a continuation that barely moves (lr 1e-12) ends where its source ended
    still = replace(again, train=again.train.replace(lr=1e-12))
    store = ResultStore(tmp_path)
    (first,) = sweep_results([source], store, progress=False, data=None)
    (second,) = sweep_results([still], store, progress=False, data=None)
    assert set(source_weights([still], None, store)) == {source.key}
    ended = dict(first.model.named_parameters())
    for name, value in second.model.named_parameters():
        assert torch.allclose(value, ended[name], atol=1e-8), name
    drawn = sweep_results([replace(still, init=None)], store, progress=False, data=None)
    assert not torch.allclose(drawn[0].model.wte.weight, ended["wte.weight"])


def test_continued_runs_train_in_worker_processes(tmp_path, monkeypatch):
    """The pool path sends each worker its ensemble's source weights."""
    monkeypatch.setenv("MARKOVLIB_WORKERS", "2")
    sources = [_spec(seed=s) for s in (0, 1)]
    store = ResultStore(tmp_path)
    sweep_results(sources, store, progress=False, data=None, workers=1)
    again = [continued(s, "fp32", 100) for s in sources]
    done = sweep_results(again, store, progress=False, data=None, ensemble_size=1)
    assert [r.seed for r in done] == [100, 101]


def test_the_trapped_seeds_are_the_shipped_runs_at_h_pi():
    """:data:`TRAPPED_SEEDS` (the continued runs' sources) read with the rule."""
    from markovlib.companion.records import shipped_records
    from markovlib.runs.experiments import TRAPPED_SEEDS, paper_edition
    from markovlib.runs.shipped import shipped_data

    data, edition = shipped_data("auto"), dict(paper_edition())
    for name, seeds in TRAPPED_SEEDS.items():
        records = shipped_records(data, edition[name])
        at = {r.spec.seed for r in records if r.cls == analysis.AT_UNIGRAM}
        assert at == set(seeds), name


def test_held_reads_without_computing(tmp_path, monkeypatch):
    monkeypatch.setenv("MARKOVLIB_RESULTS", str(tmp_path))
    monkeypatch.setenv("MARKOVLIB_DERIVED_SHIPPED", "0")
    assert D.held(theory.unigram_curvature, TRAP) is None
    value = D.derived(theory.unigram_curvature, TRAP)
    assert D.held(theory.unigram_curvature, TRAP) == value


def _at(kernel_fn, n, p=0.5, q=0.8, steps=400):
    runs = [kernel_fn(p, q) for _ in range(n)]
    for r in runs:
        r.spec.train = SimpleNamespace(steps=steps)
    return runs


def test_stays_trapped_counts_the_continued_runs_still_at_h_pi():
    m = thesis.stays_trapped(
        {"trap400-gpt2-tied-fp16": _at(at_marginal, 20) + _at(at_chain, 5)}, "fp32"
    )
    assert m.ok and m.counts == (("at H(π)", 20, 25),) and "in float32" in m.value
    gone = thesis.stays_trapped({"x": _at(at_chain, 20) + _at(at_marginal, 1)}, "fp32")
    assert not gone.ok and gone.trapped == 1


def test_the_theory_model_stays_only_after_both_budgets():
    runs = _at(at_marginal, 8) + _at(at_chain, 2)
    m = thesis.theory_model_stays(runs, _at(at_marginal, 1) + _at(at_chain, 7))
    assert m.counts == (("at H(π) after both budgets", 1, 10),) and not m.ok
    few = thesis.theory_model_stays(runs, _at(at_marginal, 2))  # a re-run's sample
    assert few.counts == (("still at H(π), of the runs continued", 2, 2),)


def test_layer_norm_is_marginal_only_when_the_difference_is_shown_small():
    def runs(k, n):
        return _at(at_marginal, k) + _at(at_chain, n - k)

    same = thesis.layer_norm_marginal(runs(12, 32), runs(12, 32))
    assert same.ok and same.details["interval"][1] < thesis.MARGINAL
    unclear = thesis.layer_norm_marginal(runs(23, 32), runs(15, 32))  # p = 0.07
    assert not unclear.ok  # not rejected is not "marginal"
    apart = thesis.layer_norm_marginal(runs(23, 32), runs(3, 32))
    assert not apart.ok and apart.details["interval"][0] > 0.3


def test_share_difference_is_newcombes_interval():
    """Newcombe (1998), Table II, example (a): 56/70 - 48/80, 0.0524 to 0.3339."""
    low, high = thesis.share_difference(56, 70, 48, 80)
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)


def test_the_curvature_rule_counts_runs_without_a_negative_direction():
    scale = thesis.saddle_scale(TRAP)
    # the fixed batch's smallest Ritz value decides nothing: its direction on fresh
    # paths does (two runs far under the line there, not confirmed)
    made = [
        curvature.Curvature(0.66, 0.01, np.array([x, 1.0]), np.zeros(2), 10, held, 1e-4)
        for x, held in [(-1e-5, -0.5 * scale)] * 12 + [(-0.5 * scale, 1e-5)] * 2
    ]
    m = thesis.curvature_rule(_at(at_marginal, 14), made)
    assert m.counts == (("no negative curvature on fresh paths", 2, 14),) and not m.ok
    unheld = [replace(c, held_out=None) for c in made]
    with pytest.raises(ValueError, match="held-out"):
        thesis.curvature_rule(_at(at_marginal, 14), unheld)
    assert m.value.startswith("12 of 14 trapped runs with a direction")


def test_the_tests_control_fails_where_fresh_paths_flag_theta_pi():
    """The control at θ_π holds when no model's held-out curvature is under the line,
    whatever the fixed batch's smallest Ritz value; it says how many the fixed batch
    alone (the rule of 2026-11-28) would flag."""
    scale = thesis.saddle_scale(TRAP)

    def at(fixed, held):
        return curvature.Curvature(
            0.66, 0.0, np.array([fixed, 1.0]), np.zeros(2), 9, held, 2e-3
        )

    noise = {"GPT-2": at(-0.048, 0.045), "theory model": at(-1.5e-4, 1.4e-4)}
    m = thesis.null_rule(noise, TRAP)
    assert m.ok and "fresh paths flag 0, the fixed batch alone 1 of 2" in m.value
    assert "GPT-2 +0.045 ± 0.002 (fixed batch -0.048)" in m.value
    flagged = {**noise, "theory model": at(-1e-5, -0.5 * scale)}
    assert not thesis.null_rule(flagged, TRAP).ok
    one = curvature.Curvature(0.66, 0.0, np.array([-1e-3, 1.0]), np.zeros(2), 9, 1e-3)
    assert "GPT-2 +0.001 (fixed batch" in thesis.null_rule({"GPT-2": one}, TRAP).value


def test_the_chapters_control_reads_the_values_the_scorecard_ships():
    """The trapped chapter's θ_π models at the paper's chain are the scorecard's (the
    derived values' keys: the shipped ones are found, none computed at paper)."""
    from markovlib.companion.chapters.trapped import NULL_GROUPS
    from markovlib.presets import resolve
    from markovlib.runs.experiments import paper_edition, trapped_groups

    S = resolve("paper", "trapped", environ=False)
    groups = trapped_groups(0.5, 0.8, S, S)
    chapter = {m: groups[g][0].config for m, g in NULL_GROUPS.items()}
    assert chapter == thesis.null_configs(dict(paper_edition()))
    shipped = thesis.null_curvatures(TRAP, chapter, compute=False)
    assert None not in shipped.values(), "the control's values are not shipped"


def test_the_summary_follows_the_parts_outcomes():
    def part(k, n):
        return SimpleNamespace(counts=(("x", k, n),), ok=k > n / 2)

    rows = dict.fromkeys(thesis.THESIS_CURVATURE, part(0, 25))
    gone = thesis.summary_text({**rows, "thesis_stays_fp32": part(1, 25)})
    assert "leaves H(π)" in gone and "negative curvature" in gone
    assert "cannot say" in gone  # neither test decides the basin (issue 67's read)
    kept = dict.fromkeys(thesis.THESIS_CURVATURE, part(25, 25))
    assert "agree" in thesis.summary_text({**kept, "thesis_stays_fp32": part(24, 25)})
    most = dict.fromkeys(thesis.THESIS_CURVATURE, part(18, 25))  # holds, 7 with one
    both = thesis.summary_text({**most, "thesis_stays_fp32": part(24, 25)})
    assert "most trapped runs show no direction" in both and "Those with one" in both
    split = dict.fromkeys(thesis.THESIS_CURVATURE, part(11, 23))  # partly: runs split
    mixed = thesis.summary_text({**split, "thesis_stays_fp32": part(1, 25)})
    assert mixed.startswith("Some trapped runs have a direction") and "leaves" in mixed
    few = thesis.summary_text({**rows, "thesis_stays_fp32": part(1, 2)})
    assert few.startswith("Too few runs")  # a re-run's sample decides nothing
    assert thesis.summary_text({"thesis_fig3a": None}).startswith("Not every part")


def test_thm2_and_thm3_hold_over_the_grid_and_depth_adds_only_flat_directions():
    assert thesis.thm2_grid().ok and thesis.thm3_point().ok
    by_depth = thesis.depth_curvature(TRAP, depths=(1, 2))
    assert by_depth[1]["block"] == pytest.approx(by_depth[2]["block"], rel=1e-9)
    assert by_depth[1]["block"] == pytest.approx(theory.unigram_curvature(TRAP))
    assert not thesis.depth_rule(by_depth, TRAP).ok  # no deeper negative, lower block


def test_below_the_line_minima_exist_and_the_standard_start_escapes_them():
    """Sec. 4.1: past the saddle the reduced loss curves upwards in e (sides swapped
    from p + q > 1, where w = 0 is Thm 2's minimum with curvature 2c); the tied runs
    below the line from the standard initialisation escaped."""
    assert thesis.e_curvature(0.0, 0.5, 0.8) == pytest.approx(
        theory.unigram_curvature(TRAP), rel=1e-5
    )
    assert thesis.e_curvature(-1.0, 0.5, 0.2) > 0 > thesis.e_curvature(0.0, 0.5, 0.2)
    below = [at_chain(0.2, 0.4), at_chain(0.4, 0.2), at_chain(0.2, 0.2)]
    above = [at_marginal(0.5, 0.8)]  # not below the line: not read
    m = thesis.below_line_minima(below + above)
    assert m.ok is False and m.counts == (("escaped", 3, 3),)  # 3 runs: too few
    many = thesis.below_line_minima(below * 4 + [at_marginal(0.2, 0.2)])
    assert many.ok and many.counts == (("escaped", 12, 13),)


def test_the_descent_row_needs_every_return_and_its_control_to_leave():
    """thm2_descent: every draw on the chain back at H(π), and every draw on the
    mirror chain gone (the control that the descent can leave)."""
    from markovlib.analysis import Perturbation

    def draws(chain, ends):
        losses = np.stack([np.full(4, chain.unigram_entropy() + 0.01), ends], 1)
        return Perturbation(chain, "theory", True, 0.5, losses[:, [0, 0, 0, 1]])

    mirror = binary(0.5, 0.2)
    back, gone = [TRAP.unigram_entropy()] * 4, [mirror.entropy_rate()] * 4
    stayed = [mirror.unigram_entropy()] * 4
    ok = thesis.perturbation_rule(
        {
            ("theory", "this chain"): draws(TRAP, back),
            ("theory", "mirror"): draws(mirror, gone),
        }
    )
    assert ok.ok and "4 of 4" in ok.value and "4 of 4 left" in ok.value
    one_stuck = [*back[:3], TRAP.entropy_rate()]
    assert not thesis.perturbation_rule(
        {
            ("theory", "this chain"): draws(TRAP, one_stuck),
            ("theory", "mirror"): draws(mirror, gone),
        }
    ).ok
    assert not thesis.perturbation_rule(  # a descent that cannot leave proves nothing
        {
            ("theory", "this chain"): draws(TRAP, back),
            ("theory", "mirror"): draws(mirror, stayed),
        }
    ).ok
