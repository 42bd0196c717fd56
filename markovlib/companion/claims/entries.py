"""The paper's testable claims as data (issue 67): one :class:`Entry` per sentence of
the paper (or the poster), in the paper's order, and the rows that judge it or why none
can; :mod:`markovlib.companion.inventory` holds them to the claims and renders the page.

The words quoted are those of the text this book works from (the repository's summary
of the paper); ``quoted`` marks the paper's own words, which that text puts in quotation
marks, and ``summary`` the summary's words for a claim it does not quote."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Entry", "ENTRIES", "QUOTED", "SUMMARY", "ROW"]

QUOTED, SUMMARY, ROW = "quoted", "summary", "row"


@dataclass(frozen=True)
class Entry:
    """One testable claim of the paper or the poster, and where the book checks it."""

    id: str
    section: str  # where the paper (or the poster) says it: "Sec. 4.2", "Fig 3(a)"
    claim: str  # the claim in one line, as this book states it
    quote: str  # a short exact quote of the text this book works from
    # QUOTED: the paper's own words; SUMMARY: the summary's words for the claim;
    # ROW: words the summary lacks, quoted from the paper's published abstract
    words: str = QUOTED
    exact: tuple[str, ...] = ()  # rows whose title is this claim
    part: tuple[str, ...] = ()  # rows that judge a part, or a pooled or wider claim
    controls: tuple[str, ...] = ()  # this book's rows beside it
    reason: str = ""  # why no row judges it (or what the rows in part leave)

    @property
    def judged(self) -> str:
        """'exactly', 'in part' or 'not judged'."""
        return "exactly" if self.exact else "in part" if self.part else "not judged"

    @property
    def rows(self) -> tuple[str, ...]:
        """Every row the entry names: exact, in part and controls."""
        return (*self.exact, *self.part, *self.controls)


_APPD = ("appd_untied", "appd_gpt2")
_THESIS = ("thesis_theory_hessian", "fig1_stays_fp32", "fig1_stays_scaled")
_THESIS += ("thesis_stays_fp32", "thesis_stays_scaled")
_THESIS += ("thesis_theory", "curvature_null")
_TEXTBOOK = (
    "a textbook fact about the chain, not a result of the paper: the unit tests of "
    "`markovlib.chains` check it (`tests/test_chains.py`), no scorecard row"
)
ENTRIES: tuple[Entry, ...] = (
    Entry(
        "abstract_induction",
        "Abstract",
        "two or more layers develop an induction head (a finding of earlier work the "
        "paper starts from)",
        "consistently develop an induction head mechanism",
        part=("incontext_induction",),
        reason="the paper publishes no setting for first-order chains with a kernel "
        "drawn per sequence: the row is judged at this book's "
        "sizes on sequences whose kernel is drawn per sequence, the setting of the "
        "works it cites",
    ),
    Entry(
        "abstract_bigram",
        "Abstract",
        "they estimate the in-context bigram conditional distribution",
        "to estimate the in-context bigram conditional distribution",
        part=("incontext_bayes",),
        reason="judged by the loss the two-layer runs reach against the Bayes floor, "
        "not by the mechanism that reaches it",
    ),
    Entry(
        "abstract_single_layer",
        "Abstract",
        "a single layer cannot form an induction head",
        "single layers cannot form one",
        SUMMARY,
        part=("incontext_single",),
        reason="what the architecture implies (a one-layer key never sees the state "
        "before it); the row checks that the score finds no head",
    ),
    Entry(
        "below_line",
        "Sec. 1, Sec. 4.2",
        "for p + q < 1 training reaches H_rate, tied or untied",
        "irrespective of the weight tying",
        exact=("below_line",),
    ),
    Entry(
        "depth_init",
        "Abstract",
        "deeper models reliably converge to the bigram",
        "reliably converge to the ground-truth bigram",
        ROW,
        part=("depth_init",),
        reason="the row judges it from 8 of the 11 seeds that trapped one layer; "
        "Fig 1's "
        "and Sec. 4.4's rows judge depth >= 2 from the standard start",
    ),
    Entry(
        "layer_norm",
        "Sec. 2",
        "leaving out the layer norm changes little in the paper's settings",
        "We omit the layer norm since its influence is marginal in the settings we "
        "consider",
        part=("layer_norm",),
        reason="the paper publishes no experiment of it: the row is this book's test "
        "on the theory model's traps, in float32, so it is labelled this book's",
    ),
    Entry(
        "all_rank_one",
        "Sec. 3.1",
        "the learnt weight matrices are all near rank one",
        "the weight matrices are all approximately rank-one",
        exact=("sec31_rank",),
        controls=_APPD,
    ),
    Entry(
        "thm1",
        "Thm 1",
        "for every (p, q), tied or untied, a parameter θ* makes f the Markov kernel "
        "with loss H_rate and zero gradient: a global minimum",
        "there is theta* with f = the Markov kernel, loss = H_rate, gradient 0",
        SUMMARY,
        exact=("thm1",),
    ),
    Entry(
        "thm1_below_line",
        "Thm 1",
        "for p + q ≤ 1 the tied construction needs neither attention nor "
        "feed-forward: σ(b) = p and ‖e‖² = logit(1 − q) − logit(p), which is ≥ 0 "
        "exactly when p + q ≤ 1",
        "take sigmoid(b) = p and ||e||^2 = logit(1-q) - logit(p) (>= 0 exactly when "
        "p+q <= 1)",
        SUMMARY,
        part=("thm1",),
        reason="`thm1` checks the constructions at (0.2, 0.3), where p + q < 1; its "
        "title is Thm 1 as a whole, not this construction",
    ),
    Entry(
        "thm1_above_line",
        "App. B.2",
        "for p + q > 1 the tied construction sends the input through the ReLU "
        "feed-forward, so that the gain on the input can be negative",
        "For p+q > 1 the tied proof routes the input through the ReLU FF",
        SUMMARY,
        part=("thm1",),
        reason="`thm1` checks the constructions at (0.5, 0.8), where p + q > 1; its "
        "title is Thm 1 as a whole, not this step of its proof",
    ),
    Entry(
        "thm2_minimum",
        "Thm 2 (i)",
        "tied, p + q > 1: the Hessian at θ_π has a positive definite (e, b) block and "
        "zeros elsewhere, and θ_π is a local minimum",
        "the Hessian is block-diagonal with a positive definite block on the (e, b) "
        "parameters and zeros elsewhere: a bad local minimum (i)",
        SUMMARY,
        part=("thm2", "thm2_grid", "thm2_descent"),
        reason="`thm2` (on (0.5, 0.8)) and `thm2_grid` (the grid's 10 chains) check "
        "the Hessian's statement, `thm2_descent` the minimum by descent on (0.5, 0.8); "
        "that such a Hessian, zero outside the block, makes a local minimum is the "
        "paper's proof, which no row computes",
    ),
    Entry(
        "thm2_point",
        "Thm 2 (ii)–(iv)",
        "at θ_π the prediction is π₁ whatever the input, the loss is H(π) and the "
        "gradient is zero",
        "Then f = pi_1 everywhere, loss = H(pi), gradient 0 (parts ii-iv)",
        SUMMARY,
        exact=("thm2_grid",),
        part=("thm2",),
    ),
    Entry(
        "thm3",
        "Thm 3",
        "untied, p + q > 1: the same point θ_π is a saddle",
        "the same point is a saddle (Hessian indefinite)",
        SUMMARY,
        exact=("thm3",),
    ),
    Entry(
        "thm3_escape",
        "Thm 3, Fig 4",
        "untied runs escape θ_π (Thm 3) and reach H_rate (Fig 4's untied cells above "
        "the line)",
        "Escapable.",
        SUMMARY,
        exact=("untied_escape",),
        controls=("untied_escape_fp32",),
    ),
    Entry(
        "thm3_point",
        "App. B.5",
        "untied, θ_π has f = π₁, loss H(π) and zero gradient too (Thm 2's parts "
        "(ii)–(iv))",
        "also satisfies (ii)-(iv) untied",
        SUMMARY,
        exact=("thm3_point",),
    ),
    Entry(
        "below_minima",
        "Sec. 4.1",
        "for p + q < 1 local minima exist too (Makkuva et al., 2024, as Sec. 4.1 "
        "cites it), but the standard Gaussian initialisation lies outside their basin",
        "local minima also exist for p+q<1, however, the standard Gaussian "
        "initialization around zero falls outside their basin of attraction",
        part=("below_minima",),
        reason="the row finds the minima of the follow-up paper's reduced model in e "
        "(flat in w) and counts the runs that escaped; no basin is computed and no "
        "minimum of the full model sought",
    ),
    Entry(
        "bad_minimum",
        "Sec. 4.1",
        "at the bad minimum the output ignores the input: f = π₁ whatever the input",
        "at the bad minimum the output ignores the input",
        SUMMARY,
        exact=("bad_minimum",),
    ),
    Entry(
        "bad_minimum_bias",
        "Sec. 4.1",
        "at the bad minimum f = σ(b) = π₁: the head's bias alone gives π₁",
        "f = sigma(b) = pi_1",
        SUMMARY,
        part=("bad_minimum_bias",),
        reason="the paper's statement is for its model without a final LayerNorm; the "
        "row judges it on the GPT-2 runs of Fig 3(a), as this book reads it",
    ),
    Entry(
        "thesis",
        "Sec. 4.2",
        "the loss landscape (Thm 2's bad local minimum) explains why the single layer "
        "of the paper's Fig 1 stays at H(π)",
        "explains the phenomenon",
        part=("thesis_fig1", "thesis_fig3a"),
        controls=_THESIS,
        reason="'explains' is not a measurement: the rows test this book's reading of "
        "it (the trapped runs sit at a local minimum, no direction of negative "
        "curvature), labelled as the book's reading",
    ),
    Entry(
        "k_state_trap",
        "Sec. 4.3, Fig 5",
        "k = 5, above the threshold: tied models tend to get stuck at the unigram "
        "minimum, untied ones reach the global minimum",
        "tend to get stuck in local minima (unigram), whereas those without converge "
        "to global minima",
        exact=("fig5",),
        controls=("fig5_gpt2", "fig5_fp32"),
    ),
    Entry(
        "k_state_converge",
        "Sec. 4.3, Fig 5",
        "k = 5: tied and untied models converge even at p = 0.6, so the threshold "
        "exceeds 0.5",
        "even at p = 0.6",
        exact=("fig5_low",),
        controls=("k_threshold",),
        reason="the paper leaves the threshold open: `k_threshold` computes it",
    ),
    Entry(
        "depth_curvature",
        "Sec. 4.4",
        "more layers change the loss curvature at the bad local minima in favour of "
        "escaping them",
        "positively affect the loss curvature at the bad local minima",
        part=("depth_curvature",),
        reason="the row tests θ_π (every weight zero, b = logit π₁), where a deeper "
        "block's weights enter the loss at third order: its second-order curvature "
        "cannot change there; the points where deeper runs plateau are not tested",
    ),
    Entry(
        "depth_factors",
        "Sec. 4.4",
        "depth ≥ 2 reaches H_rate regardless of weight tying and of the switching "
        "factor",
        "regardless of these factors",
        part=("depth_factors",),
        reason="the script of the paper's Fig 1 (Markov-LLM-k/src/schedule.sh at "
        "9b3fed7) runs tied models on (0.5, 0.8) only: the row's untied runs and its "
        "runs on the mirror chain are this book's, so it is labelled this book's",
    ),
    Entry(
        "depth_plateau",
        "Sec. 4.4",
        "the deeper models reach H_rate after a plateau near H(π)",
        "after a plateau near H(pi)",
        SUMMARY,
        exact=("depth_plateau",),
    ),
    Entry(
        "higher_order",
        "Sec. 4.4",
        "the poster's 'depth does not help on higher-order chains' came from too few "
        "iterations: given enough, deeper models learn them",
        "it came from too few iterations",
        SUMMARY,
        part=("higher_order",),
        reason="the row is this book's run of it, in float32 at its own sizes, not the "
        "authors' 10 000-iteration runs",
    ),
    Entry(
        "fig1",
        "Fig 1",
        "(0.5, 0.8), tied: the single layer stays at H(π); depths 2, 4 and 8 reach "
        "H_rate",
        "depths 1, 2, 4, 8, tied",
        SUMMARY,
        exact=("fig1",),
        controls=("fig1_fp32",),
    ),
    Entry(
        "fig1_lines",
        "Fig 1",
        "the reference lines of (0.5, 0.8): H(π) = 0.666 and H_rate = 0.619 nats",
        "reference lines at H(pi)=0.666 and H_rate=0.619",
        SUMMARY,
        reason=_TEXTBOOK,
    ),
    Entry(
        "fig3a",
        "Fig 3(a)",
        "(0.5, 0.8): tied runs end at H(π)",
        "test loss vs iteration, tied vs untied",
        SUMMARY,
        exact=("fig3a",),
        controls=("fig3a_fp32", "trap_models", "precision"),
    ),
    Entry(
        "fig3a_untied",
        "Fig 3(a)",
        "(0.5, 0.8): untied runs reach H_rate",
        "test loss vs iteration, tied vs untied",
        SUMMARY,
        part=("untied_escape",),
        reason="`untied_escape` judges every untied cell above the line of the paper's "
        "Fig 4 grid at its 500 iterations, (0.5, 0.8) among them; no row has this "
        "figure's title",
    ),
    Entry(
        "fig3b",
        "Fig 3(b)",
        "(0.2, 0.3): tied and untied runs reach H_rate",
        "tied vs untied, (0.5, 0.8) and (0.2, 0.3), with both reference lines",
        SUMMARY,
        exact=("fig3b",),
        controls=("fig3b_fp32",),
    ),
    Entry(
        "fig3cd",
        "Fig 3(c, d)",
        "after a zero the prediction is near p at the global minimum and near π₁ at "
        "the bad one",
        "near p for the global minimum, near pi_1 for the bad one",
        SUMMARY,
        part=("fig3c",),
        reason="`fig3c` sorts runs by their loss (at H(π) or escaped), not by the "
        "point they sit at: this book finds its runs at H(π) are not at θ_π",
        controls=("fig3d_path",),
    ),
    Entry(
        "fig3c_untied",
        "Fig 3(c)",
        "an untied run at p + q > 1 predicts p after a zero",
        "also shows an untied run at p+q > 1 predicting p",
        SUMMARY,
        exact=("fig3c_untied",),
    ),
    Entry(
        "fig4",
        "Fig 4",
        "over the grid p, q ∈ {0.2, 0.4, 0.5, 0.6, 0.8}, tied runs with p + q > 1 "
        "collapse to the marginal, untied ones do not",
        "Tied runs with p+q>1 collapse to the marginal.",
        SUMMARY,
        exact=("fig4",),
        controls=("fig4_3runs", "fig4_fp32"),
    ),
    Entry(
        "fig5_drawn",
        "Fig 5",
        "as drawn, the tied curves at p = 0.9 end at 0.24 of the gap, under a dotted "
        "'Unigram loss' line drawn below ln 5, not at H(π)",
        'under a dotted "Unigram loss" line drawn at 1.601',
        SUMMARY,
        exact=("fig5_figure",),
    ),
    *(
        Entry(
            f"appd_{prop}",
            "App. D",
            claim,
            quote,
            SUMMARY,
            exact=(f"appd_{prop}",),
            controls=_APPD,
        )
        for prop, claim, quote in (
            (
                "attention",
                "at the learnt solution the attention's contribution is negligible",
                "the attention contribution is negligible",
            ),
            (
                "positions",
                "the positional embeddings are constant in n",
                "positional embeddings are constant in n",
            ),
            (
                "direction",
                "e, the positional embeddings and the feed-forward matrices share "
                "one direction v",
                "p_n ∝ v, e ∝ v",
            ),
            (
                "rank",
                "the feed-forward matrices W₁ and W₂ are near rank one",
                "W_1 = w vᵀ and W_2 = v wᵀ are near rank one",
            ),
            (
                "formula",
                "the learnt weights, put into the formula, predict p and 1 − q",
                "plugging the learnt weights into the formula gives predicted "
                "probabilities ~ p and 1-q",
            ),
        )
    ),
    Entry(
        "poster_depth",
        "Poster",
        "on second-order chains depth does not help",
        "depth doesn't help",
        controls=("higher_order",),
        reason="withdrawn by the ICLR text (Sec. 4.4): the `higher_order` row checks "
        "the withdrawal instead",
    ),
    Entry(
        "poster_masking",
        "Poster",
        "on second-order chains masking (an attention window) helps",
        "masking helps",
        part=("poster_masking",),
        reason="the poster gives no settings (the authors' repository has a masked "
        "order-2 script, Markov-LLM-m/src/schedule3.sh: vocabulary 3, memory 3, 400 "
        "iterations, which no text ties to the poster): the row runs at this book's "
        "settings, so it is labelled this book's",
    ),
    Entry(
        "stationary",
        "Setting",
        "the chain's stationary law is π = (q, p)/(p + q)",
        "Stationary law pi = (q, p)/(p+q)",
        SUMMARY,
        reason=_TEXTBOOK,
    ),
    Entry(
        "entropy_rate",
        "Setting",
        "the entropy rate, the bigram loss of the global minimum, is "
        "H_rate = π₀ h(p) + π₁ h(q)",
        "H_rate = pi_0 h(p) + pi_1 h(q)",
        SUMMARY,
        reason=_TEXTBOOK,
    ),
    Entry(
        "unigram_loss",
        "Setting",
        "the unigram loss of the bad local minimum is H(π) = h(π₁)",
        "H(pi) = h(pi_1)",
        SUMMARY,
        reason=_TEXTBOOK,
    ),
    Entry(
        "gap",
        "Setting",
        "the gap H(π) − H_rate is the mutual information of two neighbours, zero "
        "exactly when p + q = 1",
        "Gap H(pi) - H_rate = I(x_n; x_{n+1}) = 0 iff p+q = 1",
        SUMMARY,
        reason=_TEXTBOOK,
    ),
    Entry(
        "k_state_rates",
        "Setting",
        "the symmetric k-state chain has a uniform stationary law, H(π) = log k and "
        "H_rate = −(1 − p) log(1 − p) − p log(p/(k − 1))",
        "Stationary law uniform; H(pi) = log k",
        SUMMARY,
        reason=_TEXTBOOK,
    ),
)
