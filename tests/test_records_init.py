"""Link and Problem write their own __init__ (speed); it must stay the dataclass's."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from composition_rl.records import Link, Problem


@pytest.mark.parametrize("cls", [Link, Problem])
def test_init_takes_exactly_the_fields_with_their_defaults(cls):
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    fields = dataclasses.fields(cls)
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields):
        if f.default is not dataclasses.MISSING:
            assert p.default == f.default, f.name
        elif f.default_factory is not dataclasses.MISSING:
            assert p.default is None, f.name  # None stands for a fresh default_factory() value
        else:
            assert p.default is inspect.Parameter.empty, f.name


def test_records_stay_frozen_comparable_and_replaceable():
    lk = Link("X", "Y", "7", "7", "3", "3", "4", "4", 12)
    p = Problem.new("What is $3 + 4$?", "7", links=(lk,), depth=2, parents=("a", "b"))
    assert p.metadata == {} and p.metadata is not Problem.new("q", "1").metadata
    assert dataclasses.replace(lk, d_latex="5") == Link("X", "Y", "7", "7", "3", "3", "5", "4", 12)
    assert dataclasses.replace(p, source="s").source == "s" and dataclasses.replace(p, source="s") != p
    assert hash(lk) == hash(Link(*dataclasses.astuple(lk)))
    assert Problem.from_dict(p.to_dict()) == p
    with pytest.raises(dataclasses.FrozenInstanceError):
        lk.x = "Z"
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.question = "changed"
