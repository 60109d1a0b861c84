"""The name registry every engine, backend and exporter goes through."""

from __future__ import annotations

import pytest

from composition_rl.registry import Registry


def test_unknown_names_list_the_known_ones_and_duplicates_raise():
    r: Registry = Registry("widget")
    r.register("a")(dict)
    with pytest.raises(KeyError, match="unknown widget 'b'; known: a"):
        r.get("b")
    with pytest.raises(ValueError, match="already registered"):
        r.register("a")(list)


def test_build_imports_module_attr_entries_lazily():
    r: Registry = Registry("thing")
    r.register("frac")("fractions:Fraction")
    r.register("direct")(dict)
    assert r.build("frac", numerator=3, denominator=6) == 0.5
    assert r.build("direct", x=1) == {"x": 1}
