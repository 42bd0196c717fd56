"""Verification of shipped run data (``markovlib verify``).

:func:`verify` proves the data without training, field by field (:data:`FIELDS`: every
stored field a reader sees, with the check that covers it): hashes, keys, the edition's
runs in their groups' files, histories, metrics recomputed by the library's own rules,
provenance, what the stored weights compute (the runs of one group as one ensemble)
and each run's first training step from its seed; then it re-trains a random sample of
runs, or every run (a member of an ensemble with its whole ensemble, through
:mod:`markovlib.runs.executors`): bit for bit where the run was produced on the same
kind of CPU, by losses, learnt kernels and predictions on a fixed batch otherwise,
within the tolerances of its kind of run (:data:`TOLERANCES`): trained and judged to
step 50 only where its kind drifts as far as a forgery after it, or was not measured
to its end, and not drawn where that holds before step 50.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import multiprocessing
import os
import random
import re
import signal
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .._checks import one_thread
from ..chains import MarkovChain, stationary_law
from ..model import Transformer
from ..train import (
    TrainResult,
    cpu_model,
    diverged_step,
    one_cycle_factor,
    provenance,
)
from . import experiments
from .derived import (
    ATOL,
    LOOSE,
    RTOL,
    check_record,
    read_record,
    recompute,
    same_as_recorded,
)
from .executors import end_pool, train_chunks, worker_started
from .shipped import (
    FILE_NAME,
    MANIFEST,
    PARTIAL,
    ShippedData,
    ShippedDataError,
    history_of,
    source_weights,
)
from .spec import CHECKPOINT_STEP, RunSpec, make_chain, spec_key
from .stacked import first_losses, kernels, path_losses, stack
from .store import metrics_of, result_from_record

__all__ = ["FIELDS", "VerificationError", "verify"]


class VerificationError(AssertionError):
    """A shipped run that the current library does not reproduce (the message names run
    and step or file)."""


# Checks without training (every run, every time):
# |learnt kernel of the stored weights - stored learnt_kernel|: the same computation
# on the same weights and paths; measured 0 on the CPU kind that produced a run and at
# most 1.1e-8 on another (AMD EPYC AVX2/AVX512 runs checked on an Intel AVX512 CPU).
KERNEL_TOLERANCE = 1e-5
# |test loss of the stored weights - last test loss of the history| (and the
# checkpoint's against the history at its step): the stored loss is a mean over
# eval_batches x batch_size paths (standard error sigma / sqrt(eval_batches b), sigma
# the per-path spread); the estimate's own standard error is added in quadrature, and
# the difference allowed is LOSS_SIGMAS of the two, at least LOSS_FLOOR.
# A run of a first-order chain from its stationary law is estimated on 8 paths of
# seq_len + 1 states by the regression estimator with two control variates (Rubinstein
# & Marcus 1985): per path, the mean next-state loss of the true kernel and of the
# stationary law, whose expectations are exactly H_rate and H(pi); the model's per-path
# loss is regressed on their deviations and the intercept is the estimate. sigma^2 is
# b^T C b + the residual variance, C the exact covariance of the two controls' means
# over seq_len transitions (:func:`_control_cov`), b the regression's slopes. The
# paths: the checkpoint's, CONTROLLED_PATHS fresh ones (its FRESH_STREAM); the final
# weights', the learnt kernel's KERNEL_PATHS (as many) each continued by one state drawn
# from the chain's kernel P (NEXT_STREAM), scored by the pass that gives the learnt
# kernel. Residual spread over the shipped runs 0.0001-0.004 nats against sigma's
# 0.002-0.04 (60 runs of 10 groups, 2026-11-29), so the estimate's own error (5 degrees
# of freedom) is small beside the stored loss's; where it is not (more than half of
# it), or the controls cannot give an estimate (paths that all look alike to them), and
# for every other run (a chain of higher order or drawn per path, another start): the
# plain mean over fresh batches of batch_size paths, drawn until the tolerance is at
# most FRESH_RESOLUTION nats or every one of eval_batches is drawn. Over the 1 242
# shipped runs' final and checkpoint weights (2 484 checks,
# benchmarks/results/verify-z-amd.json): z = Δ / se has standard deviation 1.00 and
# |z| at most 4.15 (16 above 3 where a normal law gives 6.7: sigma and the slopes
# come from 8 paths). verify --sample 0 --jobs 2 (AMD EPYC): checks
# 78-82 s (142-150 s of CPU, idle, 2026-11-29) with the final weights scored by the
# kernel's pass, 97 s (176 s; 92 s, 168 s the day before) with a pass of their own,
# 167 s (287 s) with the plain mean of fresh batches.
LOSS_SIGMAS = 6.0
LOSS_FLOOR = 1e-4
FRESH_RESOLUTION = 0.02
CONTROLLED_PATHS = 8
# The checks that evaluate stored weights run on the runs of one group at once, as one
# ensemble (markovlib.runs.stacked) of at most STACK_STATES states a batch: 32 runs of
# 16 paths of 1 025 states, about 0.3 GB of activations.
STACK_STATES = 2**19
# The checking processes' niceness beside a re-training: the re-training, one process
# that cannot be split, keeps a core while the checks, dealt in stacks after a derived
# value's recomputing, fill what it and any other work on the machine leave (issue 69)
CHECKERS_NICENESS = 10
# |train loss of step 1 recomputed from the run's seed (its starting weights on its
# first training batch, at its precision, one training at a time) - stored train loss of
# step 1|: 0 where the run was made on a CPU like this one, else float rounding (stored
# as float32: 6e-8 apart near log 2). Measured over the shipped runs (made on Intel
# Xeons with AVX512 and AMD EPYCs with AVX512 or AVX2; fp16, fp16-scaled and float32;
# ensembles and runs trained alone) on both CPU kinds: on an AMD EPYC (AVX2, 2026-11-28,
# all 1 194 runs then) at most 1.2e-7; on an Intel Xeon (AVX512, 2026-11-29, all 1 242,
# benchmarks/drift.py first) float32 at most 1.2e-7, half precision 4.2e-7 (runs
# continued at fp16-scaled from a trap, made on an AMD EPYC with AVX2; 3 of the 62 above
# 3e-7). Each tolerance is 2.4 to 2.5 times the largest of its precision. The same run's
# step 1 in fp16 against float32 differs by a median 1.1e-6 (trap400: 88 % of the 32
# pairs by more than 3e-7, 59 % by more than 1e-6): results moved between the two
# settings seed by seed are seen, at the float32 run at least.
# (bf16, of which no run is shipped, falls under "half" here, unmeasured).
FIRST_TOLERANCE = {"float32": 3e-7, "half": 1e-6}
# a stored test loss may lie below the entropy rate by sampling noise only: by at most
# max(LOSS_SIGMAS standard errors, HISTORY_MARGIN) nats (the shipped runs: 0.014)
HISTORY_MARGIN = 0.02
# The train loss of a step is its weights' loss on a batch never seen before, so
# after the checkpoint step the stored train and test losses at the evaluated steps
# estimate the same quantity up to one step's learning: over each quarter of those
# steps, the mean of train − test lies within TRAIN_SIGMAS standard errors (the
# scatter from the median of successive differences, which a forged stretch does not
# widen), at least TRAIN_FLOOR nats. The shipped runs (1 035 runs, 4 140 quarters,
# 2026-11-27): |mean| at most 0.012 nats; |z| above 8 in 3 quarters, all under
# 0.0015 nats. A forged train loss (halved) or a stretch of test losses moved by more
# than TRAIN_FLOOR is seen; smaller forgeries only by re-training.
TRAIN_SIGMAS, TRAIN_FLOOR, TRAIN_PARTS = 8.0, 0.03, 4
# stored entropies and excess against the chain's exact values (float rounding only)
METRIC_TOLERANCE = 1e-9
# Re-training where bit identity cannot be expected (another CPU kind, a GPU): |Δ| of
# every stored train and test loss (nats) up to the checkpoint (step 50) or the end, and
# of the learnt kernel and the predictions on a fixed batch of the checkpoint or final
# weights, per kind of run (kind_of: precision, start, tying) and extent. Both sides are
# measured by benchmarks/drift.py (book/making_of.md has its numbers): the drift of
# re-training shipped runs on the other CPU kind (Intel Xeon runs with AVX2 kernels on
# an AMD EPYC, 2026-11-25/28; AMD EPYC runs with AVX512 kernels on an Intel Xeon,
# 2026-11-29), and the same runs re-trained with their learning rate halved (a forgery
# of one setting). A kind whose drift reaches a forgery's has no tolerance there: a full
# re-train is judged to its checkpoint, and a run judged nowhere is not drawn on another
# CPU kind (bit for bit only, on its producer's). The Xeon's measurements, run by run
# and per kind: benchmarks/results/drift-xeon-2026-11-29*.jsonl.
#
# To the checkpoint, from a seed (its own draw, or a manifold start). float32: Xeon ->
# EPYC 282 runs of all 21 AVX512 float32 groups (the 56 manifold starts among them), at
# most 2.4e-7 (losses), 2.6e-7 (kernel), 1.9e-5 (predictions); EPYC -> Xeon 54 runs,
# 2.4e-7, 9.3e-8, 4.5e-7; forged (11 runs) at least 8.4e-3 in the losses. Half precision
# drifts more (one product rounded differently changes every later step), most where a
# run leaves the saddle before step 50: Xeon -> EPYC 198 fp16 runs, 1.1e-4, 1.6e-3,
# 1.6e-2; EPYC -> Xeon 109 runs, 2.1e-5, 3.9e-4, 2.6e-3; forged (16 runs) at least
# 6.7e-3 in the losses (fp16; fp16-scaled runs from a seed, one group of 32 made on a
# Xeon, are judged as fp16: the same arithmetic, the loss scaled before the backward
# pass). Two settings of one seed differ over steps 1-50 in the losses by at least
# 2.3e-5 (fp16 against float32: 11 times the float32 tolerance), 3.8e-4 (tied against
# untied) and 3.1e-3 (length 1024 against 512: 6 times the fp16 tolerance; tests keep
# each pair apart); fp16 against float32 and tied against untied lie inside the fp16
# tolerances: those swaps are caught without training by provenance.ensemble_members (a
# test swaps each pair), and bit for bit on a CPU like the producer's.
# To the checkpoint, continued from another run's weights (a trap; every shipped one is
# tied and was made on an AMD EPYC with AVX2), EPYC -> Xeon: float32, all 62 runs, at
# most 7.7e-7, 4.3e-6 and 1.7e-5, forged (8 runs) at least 1.3e-4, 2.1e-3 and 2.1e-3;
# half precision (fp16-scaled), all 62 runs, up to 2.7e-3, 1.4e-2 and 3.7e-2, forged (16
# runs) as little as 1.3e-4: no tolerance.
# To the end, float32 from a seed: untied, Xeon -> EPYC 2 runs (issue 71's
# 01611dbbf5da2a3b5b16, trap-theory-untied: 1.2e-6, 5.4e-6, 3.5e-4;
# tests/retrained-01611dbbf5da2a3b5b16.npz), EPYC -> Xeon 25 runs at most 1.2e-7, 9.8e-9
# and 2.1e-7; forged (2 runs, and issue 71's on the EPYC) at least 0.034, 4.8e-4 and
# 5.9e-3. Tied, EPYC -> Xeon 39 runs up to 1.5e-3, 4.1e-3 and 0.11 (Fig 4's and the
# threshold's tied runs), forged (12 runs) as little as 2.9e-3 in the losses: no
# tolerance. float32 continued, 8 runs, and half precision, 32 runs: half precision
# drifts up to 0.052 nats, forged as little as 9.1e-3: no tolerance; the continued
# float32 runs drift 1e-6 (forged 0.02) but one ensemble of the 62 is too few to set
# one.
# Each tolerance is 7.7 to 13 times the largest drift of its kind (3 to 5 times for half
# precision); each kind's loss tolerance is at least 12 times below its least forgery.
# What they let through on another CPU kind: a float32 run's stored losses moved by less
# than 2e-6 nats to step 50 (1e-5 for a continued run, and after step 50 for an untied
# one), a half-precision run's by less than 5e-4; after step 50 of a tied or
# half-precision run, anything; a half-precision run continued from another run,
# anything. Re-training on the producer's CPU kind sees every change: bit for bit.
TOLERANCES = {
    ("float32", "seed", "tied", "checkpoint"): (2e-6, 2e-6, 2e-4),
    ("float32", "seed", "untied", "checkpoint"): (2e-6, 2e-6, 2e-4),
    ("float32", "seed", "untied", "end"): (1e-5, 5e-5, 3e-3),
    ("float32", "run", "tied", "checkpoint"): (1e-5, 5e-5, 2e-4),
    ("half", "seed", "tied", "checkpoint"): (5e-4, 5e-3, 5e-2),
    ("half", "seed", "untied", "checkpoint"): (5e-4, 5e-3, 5e-2),
}
QUANTITIES = ("losses", "kernel", "predictions")
OUTPUTS = {"kernel": "learnt kernel", "predictions": "predictions on a fixed batch"}
# offsets from a run's test-data seed of the streams verify draws from (TrainResult
# uses +0 for its test batches, +1 for test_sequence and +2 for learnt_kernel's
# KERNEL_PATHS paths; NEXT_STREAM: the state after each of those paths)
FRESH_STREAM, FIXED_STREAM, NEXT_STREAM = 3, 4, 5
KERNEL_PATHS, KERNEL_STREAM = 8, 2
HALF = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp16-scaled": torch.float16}

# Every stored field of a shipped run that a chapter, the CLI or the scorecard reads
# (a column, or a key inside the metrics and provenance columns), and what checks it:
# field -> (check, why). "re-training" is verify's re-training of a sample (--sample
# all: every run), bit for bit where the provenance matches this machine, else within
# the TOLERANCES of its kind. A test asserts every stored field is listed here and
# tampers each one.
RETRAIN = "re-training"
FIELDS: dict[str, tuple[str, str]] = {
    "key": ("_check_files", "the SHA-256 of its spec"),
    "spec": ("_check_edition", "a run of the edition, in a file of its group"),
    "seed": ("_check_files", "the seed of its spec"),
    "steps": ("_check_files", "the steps of its spec"),
    "history_step": ("_check_history", "the steps its spec keeps and evaluates"),
    "lr": ("_check_history", "its spec's schedule at every stored step"),
    "train_loss": (
        f"_check_first_step, _check_train_loss, {RETRAIN}",
        "step 1: its seed's first step at its precision; after step 50: the test "
        "loss's level, per quarter; steps 2-50: --quick",
    ),
    "test_loss": (
        f"_check_loss, _check_checkpoint_loss, {RETRAIN}",
        "the last: the stored weights' loss on fresh paths; the checkpoint step's: "
        "the checkpoint's; the others: none",
    ),
    "diverged_step": ("_check_history", "derived from the history by diverged_step"),
    "weights": (
        f"_check_kernel, _check_loss, {RETRAIN}",
        "they give the stored kernel and last test loss; exact values: none",
    ),
    "weights_index": ("_consistent", "the tensors of the model of its spec"),
    "checkpoint_step": ("_consistent", "min(CHECKPOINT_STEP, steps)"),
    "checkpoint": (
        f"_check_checkpoint_loss, {RETRAIN}",
        "its loss on fresh paths is the history's test loss at its step",
    ),
    "checkpoint_index": ("_consistent", "the tensors of the model of its spec"),
    "metrics.final_test_loss": ("_check_metrics", "final_loss of its history"),
    "metrics.entropy_rate": ("_check_metrics", "its chain's exact value"),
    "metrics.unigram_entropy": ("_check_metrics", "its chain's exact value"),
    "metrics.excess": ("_check_metrics", "final_test_loss - entropy_rate"),
    "metrics.escape_step": ("_check_metrics", "escape_step's rule on its history"),
    "metrics.learnt_kernel": ("_check_kernel", "the kernel of its stored weights"),
    "metrics.seconds": ("_check_metrics", "provenance.seconds (measured: > 0)"),
    "provenance.seconds": ("_check_provenance", "> 0 and finite: a measurement"),
    "provenance.created": ("_check_provenance", "a time after 2024 and before now"),
    "provenance.markovlib": ("_check_provenance", "a version number"),
    "provenance.version": ("_check_provenance", "provenance.markovlib"),
    "provenance.torch": ("_check_provenance", "a version number"),
    "provenance.device": ("_check_provenance", "cpu, cuda[:n] or mps"),
    "provenance.device_name": ("_check_provenance", "a name"),
    "provenance.cpu_model": ("_check_provenance", "a name (absent in early runs)"),
    "provenance.cpu_capability": ("_check_provenance", "a torch CPU capability"),
    "provenance.threads": ("_check_provenance", "an integer >= 1"),
    "provenance.compile": ("_check_provenance", "true or false"),
    "provenance.ensemble_size": ("_check_ensembles", "len(ensemble_members)"),
    "provenance.ensemble_members": (
        "_check_ensembles",
        "lists the run, same settings, same list in every member",
    ),
}


def _generator(result: TrainResult, offset: int) -> torch.Generator:
    """A generator seeded ``offset`` past the run's test-data seed."""
    g = torch.Generator()
    g.manual_seed(result.test_seed + offset)
    return g


class _Paths:
    """Each run's fresh batches (its :data:`FRESH_STREAM`), drawn once and shared by
    its final and checkpoint weights."""

    def __init__(self, results: list[TrainResult]):
        self.results, self.drawn = results, [[] for _ in results]
        self.gens = [_generator(r, FRESH_STREAM) for r in results]

    def batch(self, i: int, b: int) -> torch.Tensor:
        """Run ``i``'s batch ``b`` (batch_size paths of seq_len + 1 states)."""
        s, chain = self.results[i].train_config, self.results[i].chain
        while len(self.drawn[i]) <= b:
            x = chain.sample(
                s.batch_size, s.seq_len + 1, generator=self.gens[i], start=s.start
            )
            self.drawn[i].append(x)
        return self.drawn[i][b]


def _controls(result: TrainResult, x: torch.Tensor) -> tuple | None:
    """Per path of ``x`` (B, n + 1) from the stationary law, the mean next-state loss
    of the true kernel and of the stationary law over its n transitions (B, 2), their
    exact expectations (H_rate, H(pi)) and the exact covariance of their means; None
    where they are not known exactly (a chain of higher order or drawn per path, a
    run trained from another start)."""
    chain = result.chain
    if type(chain) is not MarkovChain or result.train_config.start != "stationary":
        return None
    surprise = torch.as_tensor(-np.log(np.clip(chain.stationary(), 1e-300, None)))
    c = torch.stack([chain.next_nll(x).mean(1), surprise[x[:, 1:]].mean(1)], 1)
    means = np.array([chain.entropy_rate(), chain.unigram_entropy()])
    cov = _control_cov(chain.P.tobytes(), chain.k, x.shape[1] - 1)
    return c.numpy(), means, cov


@functools.cache
def _control_cov(kernel: bytes, k: int, n: int) -> np.ndarray:
    """The covariance (2, 2) of the means over n transitions of the stationary chain
    of kernel P of f(x_t, x_{t+1}) = (-log P[x_t, x_{t+1}], -log pi[x_{t+1}]): the pair
    (x_t, x_{t+1}) is a Markov chain, and Var(sum of f) = n g_0 + sum over h of
    (n - h)(g_h + g_h^T), g_h its lag-h autocovariance."""
    P = np.frombuffer(kernel).reshape(k, k)
    pi = stationary_law(P)
    law = (pi[:, None] * P).ravel()  # of the pair (x_t, x_{t+1})
    logs = -np.log(np.clip(P, 1e-300, None)), -np.log(np.clip(pi, 1e-300, None))
    f = np.stack([logs[0].ravel(), np.tile(logs[1], k)], 1)
    f = f - law @ f
    step = np.zeros((k * k, k * k))  # (i, j) -> (j, l) with probability P[j, l]
    for i, j in np.ndindex(k, k):
        step[i * k + j, j * k : (j + 1) * k] = P[j]
    weighted, ahead = (law[:, None] * f).T, f
    total = n * (weighted @ f)
    for h in range(1, n):
        ahead = step @ ahead
        lagged = weighted @ ahead
        total += (n - h) * (lagged + lagged.T)
    return total / n**2


def _plain(m: np.ndarray) -> tuple[float, float, float]:
    """(mean, its standard error, the per-path spread) of the per-path losses ``m``."""
    n, spread = len(m), float(m.std(ddof=1)) if len(m) > 1 else math.inf
    return float(m.mean()), spread / math.sqrt(n), spread


def _estimate(m: np.ndarray, controls) -> tuple[float, float, float] | None:
    """(estimate, its standard error, sigma) of the expected loss of a path from the
    per-path losses ``m`` and their ``controls`` (:func:`_controls`): the regression
    estimator (the intercept of m on the controls' deviations from their expectations,
    one SVD for coefficients and variance), sigma^2 = b^T C b + the residual variance;
    None where the intercept cannot be estimated (every path alike in the controls)."""
    c, means, cov = controls
    # controls kept by their exact variance, not the sample's
    kept = np.diag(cov) > 1e-12 * np.trace(cov)
    X = np.column_stack([np.ones(len(m)), (c - means)[:, kept]])
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    rank = int((S > S[0] * 1e-8).sum())
    V = Vt[:rank].T
    if len(m) - rank < 2 or abs(V[0] @ V[0] - 1) > 1e-8 or not np.isfinite(m).all():
        return None  # the intercept is not in X's row space: not estimable
    pinv = (V / S[:rank]) @ U[:, :rank].T
    coef = pinv @ m
    resid = m - X @ coef
    s2 = resid @ resid / (len(m) - rank)
    b = coef[1:]
    sigma2 = b @ cov[np.ix_(kept, kept)] @ b + s2
    return float(coef[0]), math.sqrt(s2 * (pinv[0] @ pinv[0])), math.sqrt(sigma2)


def _stored_error(result: TrainResult, sigma: float) -> float:
    """The standard error of the stored test loss, a mean over eval_batches x
    batch_size paths of per-path spread ``sigma``."""
    s = result.train_config
    return sigma / math.sqrt(s.eval_batches * s.batch_size)


def _stored_se(result: TrainResult, estimate: tuple) -> tuple[float, float]:
    """(loss, standard error of its difference from the stored test loss) from an
    estimate (loss, its error, sigma)."""
    loss, se, sigma = estimate
    return loss, math.hypot(se, _stored_error(result, sigma))


def _controlled(result: TrainResult, m: np.ndarray, controls) -> tuple | None:
    """:func:`_stored_se` of :func:`_estimate`; None where it cannot serve: no
    estimate, or its own error more than half the stored loss's (its 5 degrees of
    freedom would then weigh: the plain path's batches decide)."""
    found = _estimate(m, controls)
    if found is None or not found[1] <= _stored_error(result, found[2]) / 2:
        return None
    return _stored_se(result, found)


def _fresh_losses(config, states: list, paths: _Paths, which: list[int]) -> dict:
    """Test loss of each ``states[j]`` (the weights of run ``which[j]``, where control
    variates cannot serve) on its run's fresh batches of its evaluation's batch size,
    drawn until :data:`FRESH_RESOLUTION` (at most eval_batches), and the standard error
    of its difference from the stored test loss, by run: every run of one stack in one
    forward pass a batch. In float32 for every run: an fp16 run's loss in fp16
    autocast differs by at most 2.0e-6 nats (40 shipped fp16 runs, the same batch) and
    costs 2.9 times as much on a CPU."""
    if not which:
        return {}
    s = paths.results[which[0]].train_config
    per_path, out = {i: [] for i in which}, {}
    active = list(range(len(which)))
    for b in range(s.eval_batches):
        model = stack(config, [states[j] for j in active])
        x = torch.stack([paths.batch(which[j], b) for j in active])
        still = []
        for j, row in zip(active, path_losses(model, x)):
            i = which[j]
            per_path[i].append(row)
            m = torch.cat(per_path[i]).numpy()
            out[i] = _stored_se(paths.results[i], _plain(m))
            if not LOSS_SIGMAS * out[i][1] <= FRESH_RESOLUTION:
                still.append(j)
        active = still
        if not active:
            break
    return out


def _test_losses(config, runs: list, final: tuple) -> tuple[dict, dict]:
    """(checkpoint, final) weights' test losses and the standard errors of their
    differences from the stored ones, by run index: by control variates
    (:func:`_controlled`) on :data:`CONTROLLED_PATHS` fresh paths for the checkpoint
    (one forward pass of the stack), and for the final weights on the learnt kernel's
    paths continued by one state (:func:`_kernel_paths`), ``final`` = (those paths,
    their per-path losses from the kernel's forward pass); on fresh batches
    (:func:`_fresh_losses`) where control variates cannot serve."""
    results = [run.result for run in runs]
    paths = _Paths(results)
    due = [i for i, r in enumerate(results) if _checkpoint_loss_due(r) is not None]
    first = {i: paths.batch(i, 0)[:CONTROLLED_PATHS] for i in due}
    out = []
    for name, which, (ys, m) in (
        ("checkpoint", due, (first, None)),
        ("weights", [*range(len(runs))], final),
    ):
        controls = {i: _controls(results[i], ys[i]) for i in which}
        found, cv = {}, [i for i in which if controls[i] is not None]
        if cv and m is None:
            model = stack(config, [runs[i].record[name] for i in cv])
            m = dict(zip(cv, path_losses(model, torch.stack([ys[i] for i in cv]))))
        for i in cv:
            estimate = _controlled(results[i], m[i].numpy(), controls[i])
            if estimate is not None:
                found[i] = estimate
        rest = [i for i in which if i not in found]
        states = [runs[i].record[name] for i in rest]
        out.append({**found, **_fresh_losses(config, states, paths, rest)})
    return out[0], out[1]


def _kernel_paths(result: TrainResult) -> torch.Tensor:
    """The learnt kernel's paths (:meth:`TrainResult.learnt_kernel`: KERNEL_PATHS of
    seq_len states from the stationary law) each continued by one state: for a
    first-order chain drawn from the chain's kernel P[x_L] (inverse CDF of a float64
    uniform on the run's :data:`NEXT_STREAM`), so that the seq_len + 1 states are a
    path of the stationary chain, as the stored test loss's; for any other chain, the
    last state again. (KERNEL_PATHS, seq_len + 1); unused for a run judged on fresh
    batches."""
    s, chain = result.train_config, result.chain
    gen = _generator(result, KERNEL_STREAM)
    x = chain.sample(KERNEL_PATHS, s.seq_len, generator=gen, start="stationary")
    if type(chain) is not MarkovChain:
        return torch.cat([x, x[:, -1:]], 1)
    cdf = torch.as_tensor(np.cumsum(chain.P, 1)[:, :-1])
    u = torch.rand(
        len(x), generator=_generator(result, NEXT_STREAM), dtype=torch.float64
    )
    return torch.cat([x, (u[:, None] >= cdf[x[:, -1]]).sum(-1, keepdim=True)], 1)


@torch.no_grad()
def _outputs(spec: RunSpec, weights: dict) -> tuple[np.ndarray, torch.Tensor]:
    """The learnt kernel of ``weights`` and their predictions on the run's fixed batch
    (paths of the run's own stream)."""
    record = {
        "weights": weights,
        "provenance": {},
        "metrics": {},
        "history": None,
        "checkpoint_step": None,
        "checkpoint": None,
    }
    result = result_from_record(spec, record)
    s = spec.train
    x = result.chain.sample(
        s.batch_size,
        s.seq_len,
        generator=_generator(result, FIXED_STREAM),
        start=s.start,
    )
    return result.learnt_kernel(), result.probabilities(x)


def _expected_steps(train_config) -> tuple[np.ndarray, np.ndarray]:
    """(the steps a shipped history holds, the steps with a test loss)."""
    steps = np.arange(train_config.steps + 1)
    tested = (steps % train_config.eval_every == 0) | (steps == train_config.steps)
    return steps[tested | (steps <= CHECKPOINT_STEP)], steps[tested]


def _lr_at(train_config, step: int) -> float:
    """The learning rate of ``step`` (>= 1) as the training loop records it."""
    s = train_config
    factor = one_cycle_factor(step - 1, s.steps) if s.schedule == "one-cycle" else 1.0
    return s.lr * factor


def _check_history(where: str, spec: RunSpec, row: dict) -> int | None:
    """The stored history has the steps, evaluations and learning rates of its spec,
    and finite losses before the step where it diverged (returned; None: never)."""
    steps = np.asarray(row["history_step"], dtype=np.int64)
    lr, train_loss, test_loss = (
        np.asarray(row[c], dtype=np.float64) for c in ("lr", "train_loss", "test_loss")
    )
    kept, tested = _expected_steps(spec.train)
    if not np.array_equal(steps, kept):
        raise VerificationError(
            f"{where}: history_step holds {_span(steps)}; its spec gives {_span(kept)}"
        )
    diverged = diverged_step(history_of(row), spec.train)
    end = math.inf if diverged is None else diverged
    before = steps < end
    if not np.array_equal(steps[before & ~np.isnan(test_loss)], tested[tested < end]):
        raise VerificationError(
            f"{where}: test_loss is stored at other steps than every "
            f"{spec.train.eval_every} and the last"
        )
    if not (np.isnan(train_loss[0]) and np.isfinite(train_loss[1:][before[1:]]).all()):
        raise VerificationError(f"{where}: train_loss is missing at some steps")
    for step, value in zip(steps[1:], lr[1:]):
        if value != _lr_at(spec.train, int(step)):
            raise VerificationError(
                f"{where}: lr {float(value)!r} at step {step}; its spec's schedule "
                f"gives {_lr_at(spec.train, int(step))!r}"
            )
    return diverged


def _check_train_loss(where: str, row: dict) -> None:
    """After the checkpoint step, the train losses at the evaluated steps agree with
    the test losses there, per quarter (:data:`TRAIN_SIGMAS`, :data:`TRAIN_FLOOR`)."""
    steps = np.asarray(row["history_step"], dtype=np.int64)
    train, test = (np.asarray(row[c], np.float64) for c in ("train_loss", "test_loss"))
    both = (steps > CHECKPOINT_STEP) & np.isfinite(train) & np.isfinite(test)
    if both.sum() < 2 * TRAIN_PARTS:
        return
    parts = np.array_split(np.flatnonzero(both), TRAIN_PARTS)
    for part in parts:
        gap = train[part] - test[part]  # its scatter from successive differences
        se = 1.4826 * np.median(np.abs(np.diff(gap))) / math.sqrt(2 * len(gap))
        tolerance = max(TRAIN_SIGMAS * se, TRAIN_FLOOR)
        if not abs(gap.mean()) <= tolerance:
            raise VerificationError(
                f"{where}: train_loss over steps {steps[part[0]]}-{steps[part[-1]]} "
                f"lies {gap.mean():+.4f} nats from test_loss there (allowed "
                f"{tolerance:.4f}: the same weights on fresh paths)"
            )


def _span(steps: np.ndarray) -> str:
    """'n steps [first]..[last]'."""
    return f"{len(steps)} steps {steps[:1].tolist()}..{steps[-1:].tolist()}"


def _same(a, b, tolerance: float = 0.0) -> bool:
    """Whether two stored numbers agree (within ``tolerance``; NaN agrees with NaN)."""
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or abs(a - b) <= tolerance


def _check_metrics(where: str, result: TrainResult, m: dict, prov: dict) -> None:
    """The stored metrics are those of the stored history (the library's own rules)
    and of the chain."""
    chain, final = result.chain, result.final_test_loss
    values = {
        "final_test_loss": (final, 0.0),
        "entropy_rate": (chain.entropy_rate(), METRIC_TOLERANCE),
        "unigram_entropy": (chain.unigram_entropy(), METRIC_TOLERANCE),
        "excess": (final - chain.entropy_rate(), METRIC_TOLERANCE),
    }
    for name, (value, tolerance) in values.items():
        if not isinstance(m.get(name), float) or not _same(m[name], value, tolerance):
            raise VerificationError(
                f"{where}: metrics.{name} {m.get(name)!r}; its chain and history give "
                f"{value!r}"
            )
    escape = result.escape_step(0.005)
    if m.get("escape_step", "missing") != escape:
        raise VerificationError(
            f"{where}: metrics.escape_step {m.get('escape_step')!r}; its history "
            f"gives {escape!r}"
        )
    if m.get("seconds") != prov.get("seconds"):
        raise VerificationError(
            f"{where}: metrics.seconds {m.get('seconds')!r} differs from "
            f"provenance.seconds {prov.get('seconds')!r}"
        )


VERSION = re.compile(r"\d+(\.\d+)+\S*")
CAPABILITIES = ("DEFAULT", "VSX", "Z VECTOR", "NO AVX", "AVX2", "AVX512", "SVE256")
EARLIEST = 1704067200.0  # 2024-01-01: no run of this library is older


def _check_provenance(where: str, prov: dict) -> None:
    """Every provenance field well formed (a claim of where a run was made: verify
    can check its form and its agreement with the other fields, not its truth)."""
    name = lambda v: isinstance(v, str) and v.strip() != ""  # noqa: E731
    number = lambda v: isinstance(v, (int, float)) and math.isfinite(v)  # noqa: E731
    rules = {
        "seconds": lambda v: number(v) and v > 0,
        "created": lambda v: number(v) and EARLIEST <= v <= time.time() + 86400,
        "markovlib": lambda v: isinstance(v, str) and VERSION.fullmatch(v),
        "version": lambda v: v == prov.get("markovlib"),
        "torch": lambda v: isinstance(v, str) and VERSION.fullmatch(v),
        "device": lambda v: (
            isinstance(v, str) and re.fullmatch(r"(cpu|cuda|mps)(:\d+)?", v)
        ),
        "device_name": name,
        "cpu_model": lambda v: v is None or name(v),
        "cpu_capability": lambda v: v in CAPABILITIES,
        "threads": lambda v: isinstance(v, int) and v >= 1,
        "compile": lambda v: isinstance(v, bool),
    }
    for field, rule in rules.items():
        if not rule(prov.get(field)):
            raise VerificationError(
                f"{where}: provenance.{field} {prov.get(field)!r} is not "
                f"{FIELDS['provenance.' + field][1]}"
            )


_PACKED: dict[str, tuple[list, int]] = {}


def _packed(config) -> tuple[list, int]:
    """The index of the tensors of the model of ``config`` packed in order, and their
    number of floats (built once per config)."""
    name = json.dumps(config.to_dict(), sort_keys=True)
    if name not in _PACKED:
        wanted, offset = [], 0
        for tensor_name, tensor in Transformer(config).state_dict().items():
            wanted.append([tensor_name, list(tensor.shape), offset])
            offset += tensor.numel()
        _PACKED[name] = wanted, offset
    return _PACKED[name]


def _check_index(where: str, name: str, row: dict, config) -> None:
    """A weights index lists the tensors of the model of ``config``, in order, packed
    end to end."""
    index, blob = json.loads(row[f"{name}_index"]), row[name]
    wanted, offset = _packed(config)
    if index != wanted:
        raise VerificationError(
            f"{where}: {name}_index does not list the tensors of the model of its "
            "spec, packed in order"
        )
    if len(blob) != 4 * offset:
        raise VerificationError(
            f"{where}: {name} holds {len(blob) // 4} floats; {name}_index and the "
            f"model of its spec {offset}"
        )


def _check_kernel(where: str, kernel: np.ndarray, stored) -> float:
    """The learnt kernel of the stored weights (``kernel``) is the stored one; returns
    |Δ|."""
    stored = np.asarray(stored, dtype=np.float64)
    gap = (
        float(np.abs(np.nan_to_num(kernel - stored, nan=np.inf)).max())
        if stored.shape == kernel.shape
        else math.inf
    )
    if np.isnan(kernel).all() and np.isnan(stored).all():
        gap = 0.0  # the weights of a diverged run
    if not gap <= KERNEL_TOLERANCE:
        raise VerificationError(
            f"{where}: metrics.learnt_kernel differs from the learnt kernel of its "
            f"stored weights by {gap:.3g} > {KERNEL_TOLERANCE:g}"
        )
    return gap


def _check_loss(where: str, run: _Run, loss: float, se: float) -> float:
    """The stored weights give a test loss (``loss`` on fresh paths, standard error
    ``se``) consistent with the stored history (not finite for a run that diverged);
    returns |Δ| as a share of the tolerance."""
    result = run.result
    final, diverged = result.final_test_loss, result.diverged_step
    if diverged is not None or not math.isfinite(loss):
        if diverged is None or math.isfinite(loss):
            raise VerificationError(
                f"{where}: diverged_step {diverged!r} (by its history), but its "
                f"stored weights give a test loss of {loss:.4f} on fresh paths"
            )
        return 0.0
    share = _within_noise(
        f"{where}: test_loss ends at {final:.4f}, its stored weights", loss, final, se
    )
    if run.spec.train.start == "stationary":
        floor = result.chain.entropy_rate() - max(LOSS_SIGMAS * se, HISTORY_MARGIN)
        history = run.record["history"]
        tests = history["test_loss"].to_numpy()
        low = np.flatnonzero(tests < floor)  # NaN: not below
        if len(low):
            raise VerificationError(
                f"{where}: test_loss {tests[low[0]]:.4f} at step "
                f"{int(history['step'].to_numpy()[low[0]])} is below the entropy rate "
                f"{result.chain.entropy_rate():.4f} by more than sampling noise"
            )
    return share


def _within_noise(what: str, loss: float, stored: float, se: float) -> float:
    """|loss on fresh paths − stored test loss| as a share of its tolerance
    (:data:`LOSS_SIGMAS` standard errors ``se`` of the difference, at least
    :data:`LOSS_FLOOR`); ``what`` starts the VerificationError where it is more."""
    tolerance = max(LOSS_SIGMAS * se, LOSS_FLOOR)
    if not abs(loss - stored) <= tolerance:
        raise VerificationError(
            f"{what} give {loss:.4f} on fresh paths (|Δ| {abs(loss - stored):.4f} > "
            f"{tolerance:.4f} nats, {LOSS_SIGMAS:g} standard errors)"
        )
    return abs(loss - stored) / tolerance


def _checkpoint_loss_due(result: TrainResult) -> float | None:
    """The history's test loss at the checkpoint step, which the checkpoint's weights
    must give on fresh paths; None where there is nothing to compare (no checkpoint,
    or no stored finite test loss at its step)."""
    steps = result.history["step"].to_numpy()
    at = np.flatnonzero(steps == result.checkpoint_step)
    if result.checkpoint is None or not len(at):
        return None
    stored = float(result.history["test_loss"].to_numpy()[at[0]])
    return stored if math.isfinite(stored) else None


def _check_checkpoint_loss(where: str, result: TrainResult, loss, se) -> None:
    """The checkpoint's weights give a test loss (``loss``, standard error ``se``)
    consistent with the history's test loss at the checkpoint step (the final
    weights' check, :func:`_check_loss`)."""
    stored, step = _checkpoint_loss_due(result), result.checkpoint_step
    what = f"{where}: test_loss at step {step} is {stored:.4f}, its stored checkpoint"
    _within_noise(f"{what} weights", loss, stored, se)


def _check_first_step(where: str, run: _Run, fresh: float) -> float:
    """The stored train loss of step 1 is what the run's seed gives at its precision
    (``fresh``, :func:`~markovlib.runs.stacked.first_losses`) within
    :data:`FIRST_TOLERANCE` of its precision; returns |Δ|."""
    stored = float(run.record["history"]["train_loss"].iloc[1])
    if not (math.isfinite(stored) or math.isfinite(fresh)):
        return 0.0
    gap = abs(stored - fresh)
    tolerance = FIRST_TOLERANCE[
        "half" if run.spec.train.precision in HALF else "float32"
    ]
    if not gap <= tolerance:
        raise VerificationError(
            f"{where}: train_loss at step 1 is {stored!r}; its seed's first step at "
            f"its precision ({run.spec.train.precision}) gives {fresh!r} (|Δ| "
            f"{gap:.3g} > {tolerance:g} nats)"
        )
    return gap


@dataclass
class _Run:
    """A shipped run read for the checks without training."""

    key: str
    where: str
    spec: RunSpec
    record: dict
    result: TrainResult  # without a model: its chain, history and seed


def _alone(data: ShippedData, key: str) -> _Run:
    """Check run ``key`` against itself, its weights' forward passes aside: history,
    indexes, checkpoint step, provenance, metrics."""
    where = f"run {key} in {data.index()[key]}"
    row = data.row(key)
    spec = RunSpec.from_dict(json.loads(row["spec"]))
    _check_history(where, spec, row)
    _check_train_loss(where, row)
    _check_index(where, "weights", row, spec.config)
    expected, step = min(CHECKPOINT_STEP, spec.train.steps), row["checkpoint_step"]
    if pd.isna(step) or step != expected:
        raise VerificationError(
            f"{where}: checkpoint_step {row['checkpoint_step']!r}, expected {expected}"
        )
    _check_index(where, "checkpoint", row, spec.config)
    record = data.record(key)
    _check_provenance(where, record["provenance"])
    result = TrainResult(
        chain=make_chain(spec.chain),
        config=spec.config,
        model=None,
        history=record["history"],
        seed=spec.seed,
        train_config=spec.train,
        checkpoint_step=record["checkpoint_step"],
        checkpoint=record["checkpoint"],
    )
    _check_metrics(where, result, record["metrics"], record["provenance"])
    return _Run(key, where, spec, record, result)


def _consistent(data: ShippedData, keys: list[str]) -> tuple[float, float, float]:
    """Check the runs ``keys`` (one stack of :func:`_stacks`) against themselves
    without training: each alone (:func:`_alone`), then what their stored weights
    compute and their first training steps, as one ensemble; returns (largest kernel
    |Δ|, largest loss |Δ| / tolerance, largest first-step |Δ|)."""
    runs = [_alone(data, key) for key in keys]
    config = runs[0].spec.config
    results = [run.result for run in runs]
    final = stack(config, [run.record["weights"] for run in runs])
    y = torch.stack([_kernel_paths(r) for r in results])
    learnt, losses = kernels(final, y, results[0].chain.k)
    gaps = [
        _check_kernel(run.where, kernel, run.record["metrics"]["learnt_kernel"])
        for run, kernel in zip(runs, learnt)
    ]
    ckpt, ends = _test_losses(config, runs, (y, losses))
    shares = []
    for i, run in enumerate(runs):
        if i in ckpt:
            _check_checkpoint_loss(run.where, run.result, *ckpt[i])
        shares.append(_check_loss(run.where, run, *ends[i]))
    return max(gaps), max(shares), _first_steps(data, runs)


def _first_steps(data: ShippedData, runs: list[_Run]) -> float:
    """Every run's first training step recomputed from its seed, one training (its
    ensemble, or the run alone) at a time (:func:`_check_first_step`); a continued run
    whose source is not shipped is left out. Returns the largest |Δ|."""
    by_key, gap = {run.key: run for run in runs}, 0.0
    sources = source_weights([run.spec for run in runs], data)
    for run in runs:
        members = run.record["provenance"].get("ensemble_members") or [run.key]
        if members[0] != run.key:
            continue  # checked with the first member of its ensemble
        unit = [by_key[key] for key in members]
        if any(
            u.spec.init
            and u.spec.init.get("kind") == "run"
            and u.spec.init["key"] not in sources
            for u in unit
        ):
            continue
        fresh = first_losses([u.spec for u in unit], sources)
        for u, loss in zip(unit, fresh):
            gap = max(gap, _check_first_step(u.where, u, float(loss)))
    return gap


def _check_ensembles(data: ShippedData) -> list[tuple[str, ...]]:
    """Every run's results are its own: a run trained in an ensemble lists its own key
    among ``ensemble_members`` (results moved to another run's row name the wrong
    ensemble), every member is shipped, has the same architecture and training
    settings, and lists the same members. Returns the ensembles (keys in order)."""
    prov, group = {}, {}  # each run's group computed once (17 424 times: 0.8 s)
    for f in data.files:
        frame = data.rows(f.name)
        for key, spec, text in zip(frame["key"], frame["spec"], frame["provenance"]):
            prov[key] = json.loads(text)
            group[key] = RunSpec.from_dict(json.loads(spec)).group
    groups = set()
    for key, p in prov.items():
        where = f"run {key} in {data.index()[key]}"
        members = list(p.get("ensemble_members") or [key])
        if key not in members:
            raise VerificationError(
                f"{where}: provenance.ensemble_members ({len(members)} keys) does not "
                "list the run: its results are another run's"
            )
        if p.get("ensemble_size") != len(members):
            raise VerificationError(
                f"{where}: provenance.ensemble_size {p.get('ensemble_size')!r} is not "
                f"the number of its ensemble_members ({len(members)})"
            )
        for other in members:
            if other not in prov or group[other] != group[key]:
                raise VerificationError(
                    f"{where}: provenance.ensemble_members names run {other}, which "
                    "is not shipped or has other settings"
                )
            if list(prov[other].get("ensemble_members") or [other]) != members:
                raise VerificationError(
                    f"{where}: provenance.ensemble_members disagrees with that of its "
                    f"member {other}"
                )
        groups.add(tuple(members))
    return sorted(groups)


def _stacks(data: ShippedData, ensembles) -> list[tuple[float, list[str]]]:
    """The runs cut into stacks, each evaluated as one ensemble: whole ensembles of
    one group (:attr:`RunSpec.group`), at most :data:`STACK_STATES` states a batch
    (an ensemble larger than that alone), the same cut for any number of processes;
    each with its cost (runs x paths' attention)."""
    by_group: dict[str, tuple[RunSpec, list]] = {}
    for members in ensembles:
        spec = RunSpec.from_dict(json.loads(data.row(members[0])["spec"]))
        by_group.setdefault(spec.group, (spec, []))[1].append(list(members))
    out = []
    for spec, units in by_group.values():
        s, current = spec.train, []
        size = s.batch_size * (s.seq_len + 1)
        for unit in units:
            if current and (len(current) + len(unit)) * size > STACK_STATES:
                out.append((len(current) * size * s.seq_len, current))
                current = []
            current = current + unit
        out.append((len(current) * size * s.seq_len, current))
    return out


@functools.cache
def _checked(directory: str) -> ShippedData:
    """The data a checking process checks, opened once (at its first stack)."""
    return ShippedData(directory)


def _consistent_stack(directory: str, keys: list[str]) -> tuple[float, ...]:
    """(largest kernel |Δ|, largest loss |Δ| / tolerance, largest first-step |Δ|, CPU
    seconds) of :func:`_consistent` over one stack; run by a worker process of
    :func:`_check_runs` (one torch thread: :func:`_one_thread_worker`)."""
    cpu0 = time.process_time()
    return (*_consistent(_checked(directory), keys), time.process_time() - cpu0)


def _one_thread_worker(niceness: int = 0) -> None:
    """A checking process: one torch thread, torch and the checks imported at its
    start (while the process that started it checks the files); Ctrl-C is its
    parent's to handle (one line; the pool's exit ends it); ``niceness`` added to its
    niceness, a lower priority (:data:`CHECKERS_NICENESS`), where the system allows
    (an initializer that fails breaks the pool: every check would end in
    :data:`BROKEN`'s line)."""
    worker_started()
    if niceness:
        with contextlib.suppress(OSError, AttributeError):
            os.nice(niceness)


BROKEN = (
    "a checking process ended before its checks did (killed, or out of memory?); "
    "repeat with --jobs 1"
)


def _unbroken(call, *args):
    """``call(*args)`` on the checking processes (a task's submit or its result); a
    process that ended before its task did (killed, by kill -9 or for want of memory)
    ends it in one line, :data:`BROKEN` (a multiprocessing pool waited for ever)."""
    try:
        return call(*args)
    except BrokenProcessPool:
        raise VerificationError(BROKEN) from None


@contextlib.contextmanager
def _checkers(jobs: int, behind: bool = False):
    """``jobs`` > 1 spawned processes for the checks without training (an executor:
    :func:`_unbroken` submits a task and gets its value), started at once so that they
    import while this process checks the files, and ended on the way out (an error or
    Ctrl-C here stops them at once: :func:`~markovlib.runs.executors.end_pool`); None
    for one job (a forked child of a process that ran torch's threads can hang:
    spawned). ``behind``: at a lower priority than the re-training that runs meanwhile,
    in this process or in Ray tasks on this machine (:data:`CHECKERS_NICENESS`)."""
    if jobs <= 1:
        yield None
        return
    # SIGINT ignored from their start (inherited), not only once torch is imported;
    # only the main thread sets a handler
    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    pool = None
    try:
        pool = ProcessPoolExecutor(
            jobs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_one_thread_worker,
            initargs=(CHECKERS_NICENESS if behind else 0,),
        )
        for _ in range(jobs):  # each task starts a process, here
            pool.submit(int)
    except BaseException:
        if pool is not None:
            end_pool(pool)
        raise
    finally:
        if main:
            signal.signal(signal.SIGINT, before)
    try:
        yield pool
    finally:
        end_pool(pool)


def _ensembles_or_error(data: ShippedData):
    """:func:`_check_ensembles`'s ensembles, or the error it raised (raised after the
    files' and the edition's checks, which come first: a damaged file is named as
    such, not by what its damage breaks here)."""
    try:
        return _check_ensembles(data), None
    except Exception as e:  # noqa: BLE001 -- re-raised by _check_runs, in order
        return None, e


def _check_runs(data: ShippedData, log, first, pool=None, jobs=1, meanwhile=None):
    """Every run consistent without training (:func:`_check_ensembles`,
    :func:`_consistent`), its stacks dealt one at a time, the costliest first, to the
    ``pool``'s processes (:func:`_checkers`; None: in this process) while ``first()``
    (the files' and edition's checks) runs here; one line of summary (its seconds
    include a derived value's recomputing dealt to the pool before the stacks,
    :func:`_derived_beside`). ``meanwhile()`` (the re-training; with ``"all"`` every
    derived value's recomputing first) runs in this process while the pool checks, so
    that neither leaves a core idle (issue 51: their minute ran alone after the
    checks), else after them; returns its value."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    ensembles, error = _ensembles_or_error(data)
    own = time.perf_counter() - t0, time.process_time() - cpu0  # the ensembles' check
    stacks = _stacks(data, ensembles) if error is None else []
    stacks = [keys for _, keys in sorted(stacks, key=lambda c: -c[0])]
    directory, ended, checking = str(data.directory), [], None
    if pool is not None and stacks:
        checking = [
            _unbroken(pool.submit, _consistent_stack, directory, k) for k in stacks
        ]
        for task in checking:
            task.add_done_callback(lambda _: ended.append(time.perf_counter()))
    first()
    if error is not None:
        raise error
    log(
        f"every run's results are its own ({len(ensembles)} trainings: each run "
        "listed by its ensemble, or trained alone)"
    )
    if checking is None:  # timed without the files' and edition's checks
        t1, cpu1 = time.perf_counter(), time.process_time()
        found = [_consistent(data, keys) for keys in stacks]
        seconds = own[0] + time.perf_counter() - t1
        _log_checks(log, found, seconds, own[1] + time.process_time() - cpu1, 1)
        return meanwhile() if meanwhile else None
    with one_thread():  # beside two busy processes: no spinning threads
        out = meanwhile() if meanwhile else None
    found = [_unbroken(task.result) for task in checking]
    cpu = sum(f[3] for f in found)
    # a task's waiters wake before its done-callbacks run: the last may be to come
    end = max(ended) if len(ended) == len(checking) else time.perf_counter()
    _log_checks(log, found, end - t0, cpu, jobs)
    return out


def _log_checks(log, found, seconds: float, cpu: float, jobs: int) -> None:
    """The one line of :func:`_check_runs`: the largest |Δ| over every stack."""
    kernel, loss, first = (max((f[i] for f in found), default=0.0) for i in range(3))
    log(
        f"every run checked without training in {seconds:.0f} s "
        f"({cpu:.0f} s of CPU, {jobs} process{'es' if jobs > 1 else ''}): its stored "
        "weights give its "
        f"learnt kernel (max |Δ| {kernel:.2g} <= {KERNEL_TOLERANCE:g}) and a test loss "
        f"consistent with its history (max |Δ| {loss:.2f} of the tolerance, "
        f"{LOSS_SIGMAS:g} standard errors); its seed's first training step gives its "
        f"train loss there (max |Δ| {first:.2g}; within {FIRST_TOLERANCE['float32']:g} "
        f"nats in float32, {FIRST_TOLERANCE['half']:g} in half precision); its "
        "metrics are those of its history and chain"
    )


def derived_sample(sample: int | str) -> int | str:
    """How many shipped derived values a verify that re-trains ``sample`` runs
    recomputes: every one with ``"all"``, else one at random (none with 0)."""
    return "all" if sample == "all" else min(1, int(sample))


def _derived_beside(data: ShippedData, sample, seed, pool):
    """:func:`_recompute_derived` of one value dealt to a checking process ahead of
    the runs' stacks, so that it runs beside the re-training rather than before it in
    this process (:func:`_log_lines` logs its lines, or raises its error, after the
    re-training; returned: what gives them, :func:`_unbroken`); None without
    a pool, with no value drawn (``sample`` 0), or with every value (``"all"``:
    recomputed here first, each line as it comes, any error before the hours of
    re-training)."""
    if pool is None or sample == 0 or sample == "all":
        return None
    task = _unbroken(pool.submit, _recomputed_lines, str(data.directory), sample, seed)
    return functools.partial(_unbroken, task.result)


def _recomputed_lines(directory: str, sample, seed) -> list[str]:
    """:func:`_recompute_derived`'s lines, in a checking process."""
    lines: list[str] = []
    _recompute_derived(_checked(directory), sample, seed, lines.append)
    return lines


def _log_lines(lines, log) -> None:
    """The lines of a task of the checking processes (``lines()``, None: none) logged
    here; its error raised here."""
    for line in lines() if lines is not None else ():
        log(line)


def _check_derived(data: ShippedData, name: str) -> dict:
    """A shipped derived value's record: its hash, and its key both its file's name and
    its call's (:func:`~markovlib.runs.derived.check_record`)."""
    path = data.check(name)
    try:
        record = read_record(path)
        check_record(record, path)
    except (ValueError, KeyError, TypeError) as e:
        raise VerificationError(f"{name}: {e}") from None
    return record


def _recompute_derived(data: ShippedData, sample, seed, log) -> int:
    """Recompute ``sample`` random shipped derived values (``"all"``: every one) and
    compare each with its record (:func:`~markovlib.runs.derived.same_as_recorded`)."""
    names = sorted(data.derived)
    if sample != "all":
        rng = np.random.default_rng(seed)
        names = list(
            rng.choice(names, size=min(int(sample), len(names)), replace=False)
        )
    for name in names:
        record = _check_derived(data, name)
        t0 = time.perf_counter()
        if not same_as_recorded(recompute(record), record):
            raise VerificationError(
                f"{name}: the shipped value of {record['function']} is not what "
                f"the library computes (rtol {RTOL:g}, atol {ATOL:g}"
                + "".join(
                    f"; {field} within {atol:g}"
                    for field, atol in LOOSE.get(record["function"], {}).items()
                )
                + ")"
            )
        log(
            f"derived value {name} ({record['function']}) recomputed in "
            f"{time.perf_counter() - t0:.0f} s: the same"
        )
    return len(names)


def _check_files(data: ShippedData) -> dict[str, str]:
    """Every file hashed, keys unique, specs hashing to their keys, nothing unlisted;
    returns the index."""
    index = data.index()  # checks every file's hash and run count, keys unique
    for name in data.derived:  # hashes; each record's key is its name and its call's
        _check_derived(data, name)
    for f in data.files:
        frame = data.rows(f.name)
        for key, text, seed, steps in zip(
            frame["key"], frame["spec"], frame["seed"], frame["steps"]
        ):
            try:
                d = json.loads(text)
                computed = RunSpec.from_dict(d).key
            except (ValueError, KeyError, TypeError) as e:
                raise VerificationError(
                    f"run {key} in {f.name}: spec is not readable ({e})"
                ) from None
            if spec_key(d) != key or computed != key:
                raise VerificationError(
                    f"run {key} in {f.name}: key is not the one the current library "
                    f"computes for its spec ({computed})"
                )
            for name, value, of_spec in (
                ("seed", seed, d["seed"]),
                ("steps", steps, d["train"]["steps"]),
            ):
                if value != of_spec:
                    raise VerificationError(
                        f"run {key} in {f.name}: {name} {value!r} differs from its "
                        f"spec's {of_spec!r}"
                    )
    extra = data.unlisted()
    if extra:
        why = (
            " (a temporary file of an interrupted export: re-run `markovlib edition "
            "export`)"
            if extra[0].endswith(PARTIAL)
            else ""
        )
        more = f"; {len(extra) - 1} more unlisted" if len(extra) > 1 else ""
        raise ShippedDataError(
            f"{data.directory / extra[0]} is not listed in the manifest{why}{more}"
        )
    if not index:
        raise VerificationError(
            f"{data.directory / MANIFEST} lists no run: nothing to verify"
        )
    return index


def _check_edition(
    index: dict[str, str], groups, complete: bool, log, what: str
) -> None:
    """Every shipped run is a run of ``groups`` in a file of its group; incomplete
    groups are reported (an error with ``complete``)."""
    member: dict[str, set[str]] = {}
    for name, specs in groups:
        for spec in specs:
            member.setdefault(spec.key, set()).add(name)
    for key, file in sorted(index.items(), key=lambda kv: kv[1]):
        named = FILE_NAME.fullmatch(file)
        if named is None:
            raise VerificationError(f"{file} is not named <group>-<n>.parquet")
        if key not in member:
            raise VerificationError(f"run {key} in {file}: spec is not a run of {what}")
        if named["group"] not in member[key]:
            raise VerificationError(
                f"run {key} in {file}: spec is a run of group "
                f"{' and '.join(sorted(member[key]))} of {what}, not of group "
                f"{named['group']}"
            )
    missing = [
        (name, sum(k not in index for k in keys), len(keys))
        for name, keys in ((n, {s.key for s in specs}) for n, specs in groups)
    ]
    incomplete = [m for m in missing if m[1]]
    log(
        f"edition: {len(index)} of the {len(member)} runs of {what} shipped, "
        f"{len(missing) - len(incomplete)} of {len(missing)} groups complete"
    )
    for name, n, total in incomplete:
        log(f"  incomplete: {name}: {n} of {total} runs missing")
    if complete and incomplete:
        raise VerificationError(
            f"the edition is incomplete: {len(member) - len(index)} of the "
            f"{len(member)} runs of {what} are not shipped ({len(incomplete)} groups, "
            f"first {incomplete[0][0]}: {incomplete[0][1]} of {incomplete[0][2]})"
        )


def _environment(prov: dict, here: dict | None = None) -> tuple[bool, str]:
    """Whether bit identity is expected for a run with provenance ``prov`` re-trained
    where ``here`` says (default: this process; its whole ensemble, with its thread
    count), and why (not)."""
    here = here or provenance(torch.device("cpu"))
    if not str(prov.get("device", "cpu")).startswith("cpu"):
        return False, f"produced on {prov.get('device_name') or prov['device']}"
    if prov.get("cpu_capability") != here["cpu_capability"]:
        return (
            False,
            f"produced with CPU capability {prov.get('cpu_capability')}, "
            f"re-trained with {here['cpu_capability']}",
        )
    if (
        "cpu_model" in prov and prov["cpu_model"] != here["cpu_model"]
    ):  # runs of the first session lack the field
        return (
            False,
            f"produced on {prov['cpu_model']}, re-trained on {here['cpu_model']}",
        )
    if prov.get("compile"):
        return False, "produced through torch.compile"
    return (
        True,
        f"same CPU capability ({here['cpu_capability']}), "
        f"{prov.get('threads')} thread(s)",
    )


def kind_of(spec: RunSpec) -> tuple[str, str, str]:
    """A run's kind for its re-training tolerances: "float32" or "half" (fp16, with or
    without loss scaling; bf16 is its own, unmeasured); "seed" or "run" (its own draw,
    manifold starts included, or another run's weights); "tied" or "untied"."""
    start = "run" if (spec.init or {}).get("kind") == "run" else "seed"
    precision = {"fp32": "float32", "fp16": "half", "fp16-scaled": "half"}.get(
        spec.train.precision,
        spec.train.precision,  # bf16: not measured
    )
    return precision, start, "tied" if spec.config.tied else "untied"


def tolerance_of(spec: RunSpec, full: bool = False) -> dict[str, float] | None:
    """The re-training tolerances of a run on another CPU kind (:data:`TOLERANCES`)
    to its checkpoint, or (``full``) to its end; None where its kind's drift there
    reaches a forgery's, or was not measured: judged bit for bit only."""
    found = TOLERANCES.get((*kind_of(spec), "end" if full else "checkpoint"))
    return None if found is None else dict(zip(QUANTITIES, found))


def _compare(
    key: str,
    stored: pd.DataFrame,
    fresh: pd.DataFrame,
    exact: bool,
    upto: int | None,
    tolerance: float,
) -> None:
    """Every stored history value (up to ``upto``) against the re-trained one: equal,
    or losses within ``tolerance`` (nats)."""
    rows = stored.dropna(subset=["lr", "train_loss", "test_loss"], how="all")
    if upto is not None:
        rows = rows[rows["step"] <= upto]
    fresh = fresh.set_index("step")
    for _, row in rows.iterrows():
        step = int(row["step"])
        for column in ("lr", "train_loss", "test_loss"):
            a, b = row[column], fresh.at[step, column]
            if pd.isna(a):
                continue
            if exact and not (np.float64(a) == np.float64(b)):
                raise VerificationError(
                    f"run {key}: {column} differs first at step {step}: shipped "
                    f"{float(a)!r}, re-trained {float(b)!r}"
                )
            if not exact and column != "lr" and not abs(a - b) <= tolerance:
                raise VerificationError(
                    f"run {key}: {column} at step {step} differs by "
                    f"{abs(a - b):.4g} > {tolerance:g} nats"
                )


def _compare_weights(key: str, what: str, stored: dict, fresh: dict) -> None:
    """Bit identity of every stored tensor."""
    for name, tensor in stored.items():
        other = fresh[name].detach().cpu().float()
        if not torch.equal(tensor, other):
            raise VerificationError(
                f"run {key}: {what} tensor {name} differs from the re-trained one "
                f"(max |Δ| {(tensor - other).abs().max().item():.3g})"
            )


def _compare_outputs(
    key: str, spec: RunSpec, what: str, stored: dict, fresh: dict, tolerance: dict
) -> float:
    """Learnt kernels and predictions on the run's fixed batch of the stored and the
    re-trained weights within the run's tolerances; returns the larger |Δ|."""
    kernel, probs = _outputs(spec, stored)
    fresh_kernel, fresh_probs = _outputs(spec, {k: v.float() for k, v in fresh.items()})
    gaps = {
        "kernel": float(np.abs(kernel - fresh_kernel).max()),
        "predictions": float((probs - fresh_probs).abs().max()),
    }
    for name, gap in gaps.items():
        if not gap <= tolerance[name]:
            raise VerificationError(
                f"run {key}: {what}: their {OUTPUTS[name]} differ from the re-trained "
                f"one's by {gap:.3g} > {tolerance[name]:g}"
            )
    return max(gaps.values())


def _compare_metrics(key: str, stored: dict, fresh: TrainResult) -> None:
    """Bit identity of every stored metric but the wall time."""
    again = json.loads(json.dumps(metrics_of(fresh)))
    for name, value in stored.items():
        if name != "seconds" and again.get(name) != value:
            raise VerificationError(
                f"run {key}: metrics.{name} differs: shipped {value!r}, re-trained "
                f"{again.get(name)!r}"
            )


def _compare_retrained(
    key: str,
    record: dict,
    fresh: TrainResult,
    quick: bool,
    exact: bool,
    stopped: bool = False,
) -> str:
    """Compare one re-trained run with its stored record; how it was judged. On another
    CPU kind a full re-train is judged to its checkpoint where its kind has no
    tolerance to its end."""
    spec = RunSpec.from_dict(record["spec"])
    narrowed = not (exact or quick) and (
        stopped or tolerance_of(spec, full=True) is None
    )
    asked, quick = quick, quick or narrowed or stopped
    tolerance = None if exact else tolerance_of(spec, full=not quick)
    if not (exact or tolerance):
        raise VerificationError(f"run {key}: {unjudged(spec)}")
    upto = record["checkpoint_step"] if quick else None
    losses = 0.0 if exact else tolerance["losses"]
    _compare(key, record["history"], fresh.history, exact, upto, losses)
    final = {k: v.detach() for k, v in fresh.model.state_dict().items()}
    if exact:
        _compare_weights(key, "checkpoint", record["checkpoint"], fresh.checkpoint)
        if not quick:
            _compare_weights(key, "weights", record["weights"], final)
            _compare_metrics(key, record["metrics"], fresh)
        trained = quick and not asked  # with its ensemble, stopped at step 50
        return "bit for bit" + (
            " to its checkpoint (trained to there)" if trained else ""
        )
    what, weights = (
        ("checkpoint", (record["checkpoint"], fresh.checkpoint))
        if quick
        else ("weights", (record["weights"], final))
    )
    gap = _compare_outputs(key, spec, what, *weights, tolerance)
    how = f"{_within(tolerance)}; max |Δ| {gap:.2g})"
    after = "after it, it drifts on another CPU kind as far as a forgery"
    return how + (
        f" to its checkpoint ({after}, or was not measured)" if narrowed else ""
    )


def unjudged(spec: RunSpec) -> str:
    """Why a run of this kind is not judged by re-training on another CPU kind."""
    precision, start, tying = kind_of(spec)
    begun = "continued from another run" if start == "run" else "from its seed"
    return (
        f"a {tying} {'half-precision' if precision == 'half' else precision} run "
        f"{begun} drifts on another CPU kind as far as a forgery by its checkpoint, "
        "or was not measured: judged bit for bit only"
    )


def _within(tolerance: dict[str, float]) -> str:
    """'within 1e-05 (losses, kernel, predictions' or one tolerance each."""
    if len(set(tolerance.values())) == 1:
        return f"within {tolerance['losses']:g} (losses, kernel, predictions"
    return (
        f"within {tolerance['losses']:g} (losses), {tolerance['kernel']:g} (kernel), "
        f"{tolerance['predictions']:g} (predictions"
    )


def _ensemble(data: ShippedData, key: str) -> list[str]:
    """The keys of the ensemble that trained run ``key`` (``[key]`` for a single run),
    in order, every one shipped."""
    prov = json.loads(data.row(key)["provenance"])
    members = list(prov.get("ensemble_members") or [key])
    if key not in members or len(members) != int(prov.get("ensemble_size", 1)):
        raise VerificationError(
            f"run {key}: its provenance names an ensemble of "
            f"{prov.get('ensemble_size')} that does not list it"
        )
    for other in members:
        if other not in data:
            raise VerificationError(
                f"run {key} was trained in an ensemble with run {other}, which is not "
                "shipped: the ensemble cannot be re-trained"
            )
        theirs = json.loads(data.row(other)["provenance"])
        if list(theirs.get("ensemble_members") or [other]) != members:
            raise VerificationError(
                f"runs {key} and {other} disagree on the members of their ensemble"
            )
    return members


def _compare_unit(
    records, fresh: list[TrainResult], quick, seconds, log, stopped=False
):
    """Judge every member of one re-trained run or ensemble (``stopped``: trained only
    to step 50, --quick aside); one line each."""
    together = f" (ensemble of {len(records)})" if len(records) > 1 else ""
    for record, result in zip(records, fresh):
        exact, why = _environment(record["provenance"], result.provenance)
        key = record["key"]
        how = _compare_retrained(key, record, result, quick, exact, stopped)
        spec = RunSpec.from_dict(record["spec"])
        log(
            f"  {key} {spec.chain} seed {spec.seed}: reproduced {how}"
            f"{'' if exact else f'; {why}'}{together} in {seconds:.0f} s"
        )


def _narrowed(record: dict) -> bool:
    """Whether a full re-train of this run here is judged to its checkpoint only (its
    kind has no tolerance to its end, :func:`tolerance_of`): it stops there."""
    spec = RunSpec.from_dict(record["spec"])
    exact = _environment(record["provenance"])[0]
    return not exact and tolerance_of(spec, full=True) is None


def _retrain(data: ShippedData, units, quick: bool, executor, address, log) -> int:
    """Re-train every unit (one run, or one ensemble in order) through ``executor``
    (:func:`~markovlib.runs.executors.train_chunks`) with the thread count of its
    provenance, to step 50 where it is judged only there, and judge every member;
    returns how many runs were judged."""
    records = {k: data.record(k) for unit in units for k in unit}
    by_threads: dict[tuple[int, int | None], list[list[RunSpec]]] = {}
    for unit in units:
        specs = [RunSpec.from_dict(records[k]["spec"]) for k in unit]
        if any(s.group != specs[0].group for s in specs):
            raise VerificationError(
                f"run {unit[0]}: provenance.ensemble_members mixes architectures or "
                "training settings"
            )
        threads = records[unit[0]]["provenance"]["threads"]
        narrowed = all(_narrowed(records[k]) for k in unit)
        stop = CHECKPOINT_STEP if quick or narrowed else None
        by_threads.setdefault((threads, stop), []).append(specs)
    saved, judged = torch.get_num_threads(), 0
    try:
        for (threads, stop), chunks in by_threads.items():
            torch.set_num_threads(threads)  # the local executor's; a Ray task's own
            t0 = time.perf_counter()
            for chunk, fresh in train_chunks(
                chunks,
                executor=executor,
                device="cpu",
                address=address,
                cpus_per_task=threads,
                stop_after=stop,
                sources=source_weights([s for c in chunks for s in c], data),
            ):
                seconds, t0 = time.perf_counter() - t0, time.perf_counter()
                done = [records[s.key] for s in chunk]
                _compare_unit(done, fresh, quick, seconds, log, stop is not None)
                judged += len(chunk)
    finally:
        torch.set_num_threads(saved)
    return judged


def _candidates(
    data: ShippedData, max_seconds: float | None, exact_only: bool, log=print
) -> list[str]:
    """The shipped runs a sample is drawn from: none of a kind that re-training on
    this CPU cannot judge (:func:`tolerance_of`), said in one line."""
    out, provenance, specs = [], data.column("provenance"), data.column("spec")
    left: dict[str, int] = {}
    for key in sorted(data.index()):
        prov = json.loads(provenance[key])
        if max_seconds is not None and not prov.get("seconds", math.inf) <= max_seconds:
            continue
        exact = _environment(prov)[0]
        if exact_only and not exact:
            continue
        spec = RunSpec.from_dict(json.loads(specs[key]))
        if not exact and tolerance_of(spec) is None:
            why = unjudged(spec)
            left[why] = left.get(why, 0) + 1
            continue
        out.append(key)
    for why, n in left.items():
        log(f"not drawn: {n} runs produced on another CPU kind or device ({why})")
    return out


def _draw(data: ShippedData, sample, seed, max_seconds, exact_only, quick, log):
    """The runs to re-train (``sample`` of them drawn at random by ``seed``, or
    'all'), as whole ensembles."""
    lines: list[str] = []
    candidates = _candidates(data, max_seconds, exact_only, lines.append)
    for line in lines:
        log(line)
    if not candidates:
        raise VerificationError(_nothing_left(max_seconds, exact_only, bool(lines)))
    if sample == "all":
        chosen, how = candidates, "every run of the filter"
    else:
        chosen = random.Random(seed).sample(candidates, min(sample, len(candidates)))
        how = f"sample seed {seed}; repeat with --seed {seed}"
    units: list[list[str]] = []
    for key in chosen:
        if not any(key in unit for unit in units):
            units.append(_ensemble(data, key))
    log(
        f"re-training {len(chosen)} of {len(candidates)} "
        f"runs{' to their checkpoint' if quick else ''} in {len(units)} training(s) "
        f"({how})"
    )
    return units


def verify(
    directory: str | Path,
    *,
    sample: int | str = 2,
    seed: int | None = None,
    quick: bool = False,
    max_seconds: float | None = None,
    exact_only: bool = False,
    complete: bool = False,
    edition: Sequence[tuple[str, Sequence[RunSpec]]] | None = None,
    executor: str = "local",
    address: str | None = None,
    jobs: int = 1,
    checks: bool = True,
    log=print,
) -> int:
    """Prove the shipped data without training, then re-train ``sample`` random runs
    (``"all"``: every run) and compare.

    Without training: every field of :data:`FIELDS` that a relation binds to another
    stored value (files' hashes, spec keys, the edition's runs in their groups' files,
    histories, metrics, provenance, indexes, and what the stored weights compute);
    missing runs are reported (an error with ``complete``).

    ``quick``: re-train only to the checkpoint step and compare the history up to there
    and the checkpoint weights. ``max_seconds``: draw only among runs whose recorded
    training time is below it. ``exact_only``: draw only among runs this machine can
    reproduce bit for bit (:func:`_environment`); a run made elsewhere is judged by its
    kind's :data:`TOLERANCES` (:func:`tolerance_of`), or not drawn. A member of an
    ensemble is re-trained with its whole ensemble, through ``executor`` ('local' or
    'ray' at ``address``: :func:`~markovlib.runs.executors.train_chunks`), and every
    member is compared. ``sample=0`` re-trains nothing; a filter that leaves no run is
    an error. ``jobs``: processes of the run-by-run checks without training, and of the
    one drawn derived value's recomputing beside the re-training ("all": here, first).
    ``checks=False`` skips both (every record's key is checked). Returns the number of
    runs re-trained; raises :class:`ShippedDataError` or :class:`VerificationError`.
    """
    data = ShippedData(directory)
    first = functools.partial(_files_and_edition, data, edition, complete, log)
    # one seed draws the runs and the derived values: "repeat with --seed" repeats both
    seed = random.SystemRandom().randrange(2**31) if seed is None else seed

    def retrain(beside=None) -> int:
        if sample == 0:
            log("no run re-trained (--sample 0)")
            return 0
        if checks and beside is None:  # --retrain-only: none; a pool: beside, there
            _recompute_derived(data, derived_sample(sample), seed, log)
        units = _draw(data, sample, seed, max_seconds, exact_only, quick, log)
        n = _retrain(data, units, quick, executor, address, log)
        _log_lines(beside, log)
        return n

    if not checks:
        first()
        return retrain()
    with _checkers(jobs, behind=sample != 0) as pool:
        beside = _derived_beside(data, derived_sample(sample), seed, pool)
        meanwhile = functools.partial(retrain, beside)
        return _check_runs(data, log, first, pool, jobs, meanwhile)


def _files_and_edition(data: ShippedData, edition, complete: bool, log):
    """The files' checks (:func:`_check_files`) and the edition's
    (:func:`_check_edition`; None: the paper edition), each with its line."""
    what = "paper_edition()" if edition is None else "the edition"
    edition = experiments.paper_edition() if edition is None else edition
    index = _check_files(data)
    log(
        f"manifest: {len(data.files)} files, {len(index)} runs, "
        f"{len(data.derived)} derived values, every SHA-256 and "
        "spec key checked, keys unique, no unlisted file"
    )
    _check_edition(index, edition, complete, log, what)


def _nothing_left(max_seconds: float | None, exact_only: bool, kind: bool) -> str:
    """The one line of a filter that leaves no run to re-train (``kind``: runs of a
    kind judged bit for bit only were left out)."""
    filters = ["of a kind re-training here can judge"] if kind else []
    if max_seconds is not None:
        filters.append(f"trained in at most {max_seconds:g} s")
    if exact_only:
        filters.append(
            "produced on a CPU like this one "
            f"({torch.backends.cpu.get_cpu_capability()}, {cpu_model()})"
        )
    return (
        f"nothing to re-train: no shipped run was {' and '.join(filters)} "
        "(--sample 0 checks the data without re-training)"
    )
