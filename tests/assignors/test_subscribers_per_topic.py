"""``subscribers_per_topic``: the list-based way for small groups equals the NumPy way."""

from __future__ import annotations

import random

import pytest

import assignors._common as common
from assignors._common import member_info_order, subscribers_per_topic

from .conftest import group, member


def _random_group(rng: random.Random):
    names = [f"t{i}" for i in range(rng.randint(1, 7))]
    shapes = [tuple(rng.sample(names, rng.randint(0, len(names)))) for _ in range(rng.randint(1, 4))]
    members = [
        member(f"m{rng.randint(0, 999):03d}-{i}", rng.choice(shapes), instance=f"i{i}" if rng.random() < 0.2 else None)
        for i in range(rng.randint(1, 40))
    ]
    return group(*members, topics={name: rng.randint(0, 5) for name in names})


@pytest.mark.parametrize("seed", range(60))
def test_small_group_subscribers_equal_the_array_way(seed, monkeypatch):
    spec = _random_group(random.Random(seed))
    order = member_info_order(spec)
    small = subscribers_per_topic(spec, order)
    monkeypatch.setattr(common, "SMALL_GROUP", -1)
    large = subscribers_per_topic(spec, order)
    assert list(small) == list(large)
    for topic in small:
        assert small[topic].tolist() == large[topic].tolist()
        assert not small[topic].flags.writeable
    # Topics with the same subscribers share one array (the assignors key their work on it).
    for a in small:
        for b in small:
            assert (small[a] is small[b]) == (large[a] is large[b])
    # Each topic's subscribers are exactly the members subscribing to it, in member order.
    for topic, subscribers in small.items():
        assert subscribers.tolist() == [i for i in order if topic in spec.members[i].topics]
