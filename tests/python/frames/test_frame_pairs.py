"""The frame cache's soundness on program pairs (frame_pairs.py, run by frame_pairs_runner.py): A cold, B warm on A's
cache with the frame verifier on, B under uncached inductor as the reference. The fixed attack table and a seeded
draw of generated pairs run in one batch (one process per pass and shard); each pair is one test.

`make fuzz-frames SEED=<n> N=<count>` runs any other draw.
"""

from __future__ import annotations

import os

import frame_pairs
import frame_pairs_runner
import pytest

# The batched passes of 160 pairs (the attack table and 90 drawn), 13 of them on Hugging Face models.
pytestmark = pytest.mark.timeout(2400)
SEED = int(os.environ.get("AOTCACHE_PAIRS_SEED", "20261205"))
# Every operator at least once (one round of the draw), then some in a second base; `make fuzz-frames` draws more.
N_GENERATED = int(os.environ.get("AOTCACHE_PAIRS_N", "90"))

ATTACK = frame_pairs.attack_pairs()
GENERATED = frame_pairs.generated_pairs(SEED, N_GENERATED)
PAIRS = ATTACK + GENERATED


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    work = tmp_path_factory.mktemp("pairs")
    results = frame_pairs_runner.run(PAIRS, work, workers=2)
    judged = {v.name: v for v in frame_pairs_runner.judge(PAIRS, results)}
    print("\n" + frame_pairs_runner.table(list(judged.values())))
    return judged


def test_the_suite_is_as_large_as_promised():
    assert len(ATTACK) >= 45
    assert len(GENERATED) >= max(90, len(frame_pairs.OPERATORS))
    assert len({p.name for p in PAIRS}) == len(PAIRS)
    # every operator is drawn, in more than one base
    drawn = {(p.operator, p.base) for p in GENERATED}
    assert {op for op, _ in drawn} == {op.name for op in frame_pairs.OPERATORS}
    assert len({base for _, base in drawn}) == len(frame_pairs.BASES)


@pytest.mark.parametrize("name", [p.name for p in PAIRS])
def test_pair(verdicts, name):
    verdict = verdicts[name]
    assert verdict.ok, "; ".join(verdict.problems)


@pytest.mark.parametrize("name", [p.name for p in ATTACK if p.operator != "none" and p.observable])
def test_attack_pair_changes_the_result(verdicts, name):
    """An attack pair whose B computes what A computes would prove nothing: A's frame would be right for B."""
    assert verdicts[name].differs, f"{name}: A and B give the same results"


@pytest.mark.parametrize("name", frame_pairs_runner.SERVED_WHOLE)
def test_eval_before_training_compiles_nothing_warm(verdicts, name):
    """A warm process that calls eval before the training step is served both frames (eval_before_train: the
    training candidate, recorded first, is tried and fails at the eval call; it used to be skipped for the rest of
    the process, known_failing, because its builtins global was removed under the guard manager kept for it)."""
    v = verdicts[name]
    assert v.served >= 2 and v.traced == 0, v


def test_the_verifier_finds_a_stale_frame(tmp_path, monkeypatch):
    """The oracle can fail: with the read set's check switched off (in the worker only), B is served A's stale frame;
    the verifier must count the mismatch, say what differs, and run Dynamo's result (B equals the reference)."""
    monkeypatch.setenv("AOTC_PAIR_DISABLE_READ_SET", "1")
    pairs = [p for p in ATTACK if p.operator in ("lib_global", "class_at_import", "rebind_torch")]
    results = frame_pairs_runner.run(pairs, tmp_path, workers=2)
    for v in frame_pairs_runner.judge(pairs, results):
        assert v.served >= 1, v
        assert any("verifier:" in p for p in v.problems), v
        assert any("frame verify mismatch" in p and "differs from Dynamo" in p for p in v.problems), v
        assert not any("!= reference" in p for p in v.problems), v
