"""What a bundle holds, read without running it: its variants and its test cases (how the pytest plugin names
its items before any runs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Outline:
    """A bundle's variants (none: one model) and its test cases: (index, spec, origin) each."""

    variants: tuple[str, ...]
    cases: tuple[tuple[int, str, str], ...]


def outline(path: str) -> Outline:
    """Open a bundle (its manifest and member hashes checked) and list what it holds.

    Raises:
        BundleError: not a bundle, or a damaged one.
    """
    from ..bundle.reader import Bundle, peek_variants

    with Bundle(path) as bundle:
        cases = tuple((k, case.spec, case.origin) for k, case in enumerate(bundle.manifest.test_cases))
    return Outline(tuple(peek_variants(path)), cases)
