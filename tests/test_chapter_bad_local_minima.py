"""markovlib.companion.chapters.bad_local_minima: its page's own numbers, checks and
sentences, on small made-up runs and chains."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from markovlib.chains import binary


def test_the_bad_local_minima_sentences_count_the_runs():
    from markovlib.companion.chapters.bad_local_minima import (
        perturbation_text,
        trap_training_text,
    )

    def result(p, q, returned):
        returned = np.array(returned, dtype=bool)
        return SimpleNamespace(chain=binary(p, q), returned=returned, left=~returned)

    perturbed = {
        ("theory", "this chain"): result(0.5, 0.8, [True, True, False]),
        ("theory", "mirror"): result(0.5, 0.2, [False, False, False]),
    }
    text = perturbation_text(perturbed, 0.5, 0.8, False)
    assert "theory model, this chain (p + q = 1.30): 2 of 3 runs returned" in text
    assert "1 left towards" in text and "3 left towards" in text
    assert "**not** the clean picture" in text
    assert "As Thm 2 predicts" in perturbation_text(perturbed, 0.5, 0.8, True)
    assert "Thm 2 does not apply" in perturbation_text(perturbed, 0.5, 0.2, True)
    assert "inconclusive" in perturbation_text(perturbed, 0.5, 0.5, True)
    assert "far too short" in trap_training_text("smoke", False, 0.5, 0.8, ["x"])
    below = trap_training_text("cpu", True, 0.2, 0.3, [])
    assert "Thm 2 does not apply" in below and "Sec. 4.1" in below  # minima exist
    assert "no gap" in trap_training_text("cpu", True, 0.5, 0.5, [])  # on the line
    text = trap_training_text("paper", True, 0.5, 0.8, ["a of b", "c of d"])
    assert text.startswith("Measured at the `paper` scale in float32: a of b; c of d.")


def test_trap_variant_texts_glue_every_model_as_k_of_n():
    from markovlib.companion.chapters.bad_local_minima import (
        TRAP_KEYS,
        trap_variant_texts,
    )

    def stats(k, median):
        return SimpleNamespace(
            plateau_text=lambda at_end=False: f"{0 if at_end else k} of 32",
            median_text=median,
        )

    texts = trap_variant_texts(
        {name: stats(i, f"{100 * i}") for i, name in enumerate(TRAP_KEYS)}, "theory"
    )
    assert texts["blm_preset"] == "`theory`"
    assert texts["trap_fraction_at_400"] == "1 of 32" == texts["trap_fraction_theory"]
    assert texts["trap_fraction_end"] == "0 of 32"
    assert texts["median_escape_step"] == "100"
    assert texts["trap_fraction_gpt2_wide"] == "3 of 32"
    assert texts["median_escape_theory_ln"] == "200"
    assert len(texts) == 4 + 2 * len(TRAP_KEYS)


def test_labels_name_every_group_its_trained_claims_read():
    from markovlib.companion.chapters.bad_local_minima import LABELS
    from markovlib.companion.claims import CLAIMS

    read = {g for c in CLAIMS if c.chapter == "bad_local_minima" for g in c.groups}
    assert read == set(LABELS)
