"""The state buckets' key values: each bucket's hash residue, and an even spread over the shuffle."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, strategies as st

from streaming.job.bucket_keys import bucket_keys, spark_hash_long


@given(st.integers(min_value=1, max_value=300))
def test_bucket_i_is_keyed_by_the_smallest_value_whose_hash_is_i_modulo_the_bucket_count(buckets):
    keys = bucket_keys(buckets)
    assert len(keys) == buckets
    for i, key in enumerate(keys):
        assert spark_hash_long(key) % buckets == i
        assert all(spark_hash_long(smaller) % buckets != i for smaller in range(key))


@pytest.mark.parametrize("buckets, partitions", [(32, 1), (32, 2), (32, 4), (32, 8), (32, 32), (12, 3), (12, 6)])
def test_every_partition_count_that_divides_the_bucket_count_gets_as_many_buckets(buckets, partitions):
    spread = Counter(spark_hash_long(key) % partitions for key in bucket_keys(buckets))
    assert spread == {p: buckets // partitions for p in range(partitions)}


def test_plain_bucket_numbers_would_not_spread_evenly():
    # Why the keys exist: Spark hashes 0..31 onto two partitions as 20 and 12.
    assert sorted(Counter(spark_hash_long(n) % 2 for n in range(32)).values()) == [12, 20]


def test_a_bucket_count_below_one_is_refused_by_name():
    with pytest.raises(ValueError, match="state buckets"):
        bucket_keys(0)
