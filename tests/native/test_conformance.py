"""mgerun-native gives mgerun's verdict on every bundle of the conformance corpus (issue 31, docs/native.md):
the same exit code, the same verdict per variant, test case and output, ``err`` to 6 significant digits, and
the same class of refusal. A difference in either direction fails."""

from __future__ import annotations

import pytest

from tests.cli import test_hostile as hostile
from tests.native import corpus, harness

ENTRIES = corpus.entries()
EXIT = {"pass": 0, "fail": 1, "refuse": 2}


def test_the_corpus_holds_every_kind():
    ids = [e.id for e in ENTRIES]
    assert len(ids) == len(set(ids))
    assert len(ENTRIES) >= 40
    assert sum(e.kind == "refuse" for e in ENTRIES) >= 15
    assert {e.kind for e in ENTRIES} == set(EXIT)


def test_every_bundle_case_of_the_hostile_suite_is_in_it():
    """The hostile-input suite's cases that run ``mgerun BUNDLE`` are taken by id: none is lost when it grows."""
    known = {c.id: c for c in hostile.CASES}
    taken = set(corpus._hostile_ids())
    assert taken <= set(known)
    others = {"bundle-fifo", "bundle-chardev", "bundle-socket", "bundle-folder", "bundle-path-empty",
              "bundle-path-ends-in-slash", "bundle-is-external-data", "bundle-links-to-external-data"}  # fmt: skip
    bundle_cases = {
        c.id for c in hostile.CASES
        if c.prog == "mgerun" and c.id.startswith(("bundle-", "manifest-", "member", "zip-")) and c.id not in others
    }  # fmt: skip
    assert bundle_cases <= taken, bundle_cases - taken


@pytest.mark.filterwarnings("ignore:Duplicate name:UserWarning")
@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_mgerun_native_gives_mgerun_verdict(entry, corpus_index, mgerun, request):
    built = corpus_index[entry.id]
    args = harness.bundle_args(built)
    reference = mgerun(*args)
    reference = harness.Outcome(reference.code, reference.out, reference.err)
    # the corpus itself: each bundle is what it was made to be, by mgerun's word
    assert reference.code == EXIT[entry.kind], (entry.id, reference.out[-2000:], reference.err)
    if reference.code == 2:
        assert not any(c.startswith("unclassified") for c in harness.refusals(reference)), reference.err
    native = request.getfixturevalue("native")
    got = harness.run_native(native, args)
    problems = harness.differences(reference, got)
    assert not problems, (
        f"{entry.id}: " + "\n".join(problems) + f"\n--- native stdout:\n{got.out}\n--- stderr:\n{got.err}"
    )
