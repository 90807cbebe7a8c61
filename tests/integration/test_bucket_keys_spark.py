"""The bucket keys against real Spark: its hash() and its hash partitioning of the stateful shuffle."""

from __future__ import annotations

from collections import Counter

import pytest
from pyspark.sql import functions as F

from streaming.job.bucket_keys import bucket_keys, spark_hash_long

pytestmark = pytest.mark.integration


def test_spark_hash_long_is_spark_s_own_hash_of_a_bigint(spark):
    values = [0, 1, -1, 31, 2**31, -(2**31) - 1, 2**63 - 1, -(2**63), 123_456_789_012]
    df = spark.createDataFrame([(v,) for v in values], "v bigint")
    got = {row.v: row.h for row in df.select("v", F.hash("v").alias("h")).collect()}
    assert got == {v: spark_hash_long(v) for v in values}


@pytest.mark.parametrize("partitions", [2, 4])
def test_spark_s_shuffle_gives_each_partition_as_many_buckets(spark, partitions):
    keys = spark.createDataFrame([(k,) for k in bucket_keys(32)], "state_bucket bigint")
    placed = keys.repartition(partitions, "state_bucket").select(F.spark_partition_id().alias("p")).collect()
    assert Counter(row.p for row in placed) == {p: 32 // partitions for p in range(partitions)}
