"""markovlib.companion.chapters.framework: its page's own numbers, checks and
sentences, on small made-up runs and chains."""

from __future__ import annotations

import numpy as np
import pytest

from markovlib.chains import binary
from markovlib.companion import chapters


def test_framework_facts_and_checks_hold_for_chains_and_catch_errors():
    from markovlib import chains
    from markovlib.model import Transformer, TransformerConfig

    facts = chapters.framework.chain_facts(0.5, 0.8)
    assert facts["fw_pi_0"] == pytest.approx(8 / 13) and facts["fw_switching"] == 1.3
    assert facts["fw_regime"].startswith("above 1")
    assert chapters.framework.chain_facts(0.2, 0.3)["fw_regime"].startswith("below 1")
    assert chapters.framework.chain_facts(0.3, 0.7)["fw_regime"].startswith("exactly 1")
    for p, q in ((0.5, 0.8), (0.3, 0.7), (0.2, 0.3)):
        assert all(chapters.framework.entropy_checks(binary(p, q)).values()), (p, q)
    grid = np.round(np.linspace(0.02, 0.98, 49), 10)
    rate, unigram = chains.entropy_grid(grid)
    assert all(chapters.framework.entropy_grid_checks(grid, rate, unigram).values())
    bent = rate.copy()
    bent[3, 7] += 1e-6
    bad = chapters.framework.entropy_grid_checks(grid, bent, unigram)
    assert not bad["grid: closed forms"] and not bad["grid: symmetric about p = q"]
    assert chapters.framework.entropy_facts(binary(0.5, 0.8), grid, rate, unigram)[
        "fw_gap_max"
    ] == pytest.approx((unigram - rate).max())
    chain = binary(0.5, 0.8)
    x = chain.sample(64, 200, seed=0)
    est = chains.empirical_kernel(chain, x)
    assert all(chapters.framework.sampler_checks(chain, x, est, 5.0).values())
    wrong = chains.empirical_kernel(chain, binary(0.3, 0.8).sample(64, 200, seed=0))
    assert not chapters.framework.sampler_checks(chain, x, wrong, 5.0)[
        "transition frequencies within 5 std. errors"
    ]
    table = chapters.framework.transition_table(chain, est)
    assert table["transitions n_i"].dtype.kind == "i"  # counts, not 1.208e+04
    assert table["transitions n_i"].sum() == est["counts"].sum()
    assert all(chapters.framework.symmetric_checks(5, 0.1).values())
    assert chapters.framework.symmetric_facts(5, 0.1)[
        "fw_multi_entropy_rate"
    ] == pytest.approx(0.4637, abs=5e-5)
    configs = {
        (pr, t): getattr(TransformerConfig, pr)(
            vocab_size=2, d_model=4, tied=t == "tied"
        )
        for pr in ("theory", "gpt2")
        for t in ("tied", "untied")
    }
    n = {key: Transformer(cfg).n_params() for key, cfg in configs.items()}
    assert all(chapters.framework.parameter_checks(configs, n, 4).values())
    assert not all(
        chapters.framework.parameter_checks(
            configs, n | {("gpt2", "tied"): 1}, 4
        ).values()
    )
    facts = chapters.framework.parameter_facts(n, 4, 16)
    assert facts["fw_n_params_positional"] == 64 and facts["fw_max_len"] == 16
    shapes, dev = (
        {"theory": (2, 8, 2), "gpt2": (2, 8, 2)},
        {"theory": 0.01, "gpt2": 0.1},
    )
    assert all(chapters.framework.forward_checks(shapes, dev, 2, 8).values())
    assert not all(chapters.framework.forward_checks(shapes, dev, 2, 9).values())
    exact = np.full(10, 0.5)
    assert all(chapters.framework.marginal_checks(1.0, exact, exact, 100, 5.0).values())
    assert not all(
        chapters.framework.marginal_checks(1.0, exact + 0.4, exact, 100, 5.0).values()
    )
