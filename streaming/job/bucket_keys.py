"""Key values for the state buckets that Spark's shuffle spreads evenly over its partitions.

The stateful operator is keyed by state bucket (``job.state_buckets`` of them, see processor.py),
and Spark sends a key to shuffle partition ``pmod(murmur3(key, seed 42), partitions)``. Plain bucket
numbers 0..31 land 20 and 12 on two partitions, so one of the stateful stage's two tasks carried
five eighths of the groups and the stage waited for it. Bucket ``i`` is therefore keyed by the
smallest non-negative number whose hash is ``i`` modulo the bucket count: every number of shuffle
partitions that divides the bucket count then gets the same number of buckets.
"""

from __future__ import annotations

import struct
import mmh3

#: The seed of Spark's ``Murmur3Hash`` expression, which ``HashPartitioning`` uses.
SPARK_HASH_SEED = 42


def spark_hash_long(value: int) -> int:
    """Spark's ``hash()`` of a BIGINT: Murmur3 x86 32-bit of its 8 little-endian bytes, seed 42."""
    return mmh3.hash(struct.pack("<q", value), SPARK_HASH_SEED, signed=True)


def bucket_keys(buckets: int) -> tuple[int, ...]:
    """The key of each bucket: ``keys[i]`` is the smallest value >= 0 with ``pmod(hash, buckets) == i``."""
    if buckets < 1:
        raise ValueError(f"the number of state buckets must be at least 1, got {buckets}")
    keys: list[int | None] = [None] * buckets
    missing = buckets
    value = 0
    while missing:
        residue = spark_hash_long(value) % buckets  # Python's % is Spark's pmod for a positive divisor
        if keys[residue] is None:
            keys[residue] = value
            missing -= 1
        value += 1
    return tuple(keys)  # type: ignore[arg-type]


def state_bucket(group_key, buckets: int):
    """The Spark column of a row's state-bucket key: its group's bucket ``pmod(xxhash64(group_key),
    buckets)`` as that bucket's key (:func:`bucket_keys`)."""
    from pyspark.sql import functions as F

    index = (F.pmod(F.xxhash64(group_key), F.lit(buckets)) + 1).cast("int")
    return F.element_at(key_array(buckets), index)


def key_array(buckets: int):
    """Every bucket's key as a Spark array literal, bucket ``i`` at position ``i + 1``."""
    from pyspark.sql import functions as F

    return F.array(*[F.lit(key).cast("bigint") for key in bucket_keys(buckets)])
