"""The Java containers Kafka Streams' assignors walk: hash maps of task and process ids, and the
priority queue of clients whose loads change while they are queued (no JVM here: the walks the JDK
gives are checked against the JDK itself in test_differential_streams_java.py)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.streams import java_hash
from assignors.streams.java_queue import ConstrainedPrioritySet, JavaPriorityQueue, java_priority_queue_order
from assignors.streams.model import task_sort_key


def task_hash(task: str) -> int:
    return java_hash.task_id_hash(*task_sort_key(task))


# --- hash codes and table sizes --------------------------------------------------------------------

def test_task_id_hash_is_objects_hash_of_subtopology_partition_and_no_topology_name():
    assert java_hash.task_id_hash(0, 0) == 29791
    assert java_hash.task_id_hash(1, 0) == java_hash.task_id_hash(0, 31) == 29791 + 961
    assert java_hash.subtopology_hash(2) == 31 * (31 + 2)


def test_process_id_hash_is_the_uuid_hash():
    # UUID.hashCode: (int)(x >>> 32) ^ (int) x with x = msb ^ lsb.
    assert java_hash.process_id_hash("00000000-0000-0001-0000-000000000003") == 2
    assert java_hash.process_id_hash("not-a-uuid") == java_hash.process_id_hash("not-a-uuid")  # String.hashCode


@pytest.mark.parametrize("size, copy, put_all", [(0, 16, 0), (1, 16, 2), (12, 32, 32), (13, 32, 32), (24, 64, 64),
                                                  (48, 128, 128), (100, 256, 256)])
def test_jdk17_table_sizes_of_copies_and_put_all(size, copy, put_all):
    assert java_hash.copy_sized(size) == copy
    assert java_hash.put_all_sized(size) == put_all


# --- walks ------------------------------------------------------------------------------------------

def test_keys_sharing_a_bucket_keep_insertion_order_and_buckets_go_by_index():
    # 0_0 and 0_16 share bucket 15 of a 16-slot table (29791 & 15 = 15, + 31 * 16 keeps it); 0_1 is in 14.
    assert java_hash.hash_order(["0_16", "0_0", "0_1"], task_hash, task_sort_key) == ["0_1", "0_16", "0_0"]


def test_a_crowded_bucket_becomes_a_tree_whose_walk_the_jdk_fixes():
    # Thirteen task ids with one hash (31 * s + p = 400): the bucket turns into a red-black tree. The
    # walk below is what JDK 17's HashSet gives (taken from the reference's JVM), before and after
    # three HashSet.remove calls; insertion order it is not.
    keys = ["12_28", "11_59", "1_369", "6_214", "0_400", "4_276", "10_90", "7_183", "5_245", "2_338", "8_152",
            "9_121", "3_307"]
    assert java_hash.hash_order(keys, task_hash, task_sort_key) == [
        "6_214", "12_28", "11_59", "1_369", "0_400", "4_276", "10_90", "9_121", "7_183", "5_245", "2_338", "3_307",
        "8_152"]
    removed = ["12_28", "6_214", "4_276"]
    assert java_hash.hash_order_after_removals(keys, removed, task_hash, task_sort_key) == [
        "7_183", "11_59", "1_369", "0_400", "10_90", "9_121", "5_245", "2_338", "3_307", "8_152"]


task_ids = st.tuples(st.integers(0, 12), st.integers(0, 420)).map(lambda sp: f"{sp[0]}_{sp[1]}")
crowded_ids = st.integers(0, 12).map(lambda s: f"{s}_{400 - 31 * s}")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(task_ids, crowded_ids), unique=True, max_size=150),
       st.sampled_from([0, 1, 16, 64, 256]), st.data())
def test_the_one_sort_answer_is_the_full_replay_whenever_it_is_used(keys, table, data):
    full = java_hash.hash_set_of(keys, task_hash, task_sort_key, table)
    assert java_hash.hash_order(keys, task_hash, task_sort_key, table) == list(full)
    removed = data.draw(st.lists(st.sampled_from(keys), unique=True) if keys else st.just([]))
    for k in removed:
        full.remove(k)
    assert java_hash.hash_order_after_removals(keys, removed, task_hash, task_sort_key, table) == list(full)
    assert len(full) == len(keys) - len(removed)


# --- PriorityQueue -----------------------------------------------------------------------------------

@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 20), max_size=60))
def test_with_fixed_keys_the_queue_polls_in_key_order(keys):
    queue = JavaPriorityQueue(lambda i: (keys[i], i))
    for i in range(len(keys)):
        queue.offer(i)
    polled = [queue.poll() for _ in keys]
    assert polled == sorted(range(len(keys)), key=lambda i: (keys[i], i))


def test_equal_keys_come_out_in_the_order_javas_sifts_leave_them():
    # Seven items with one key: siftUp never moves them, each poll moves the last one to the root.
    assert java_priority_queue_order(list("abcdefg"), key=lambda _: 0) == list("agfedcb")


def test_a_key_lowered_while_queued_stays_hidden_below_its_parent():
    # The heap array is [a, b, c, d, e] with keys 1, 5, 2, 6, 7. Lowering d to 0 breaks the heap
    # under b; Java's poll sifts the last element down from the root and never looks at d, so the
    # second poll returns c (2) while d (0) is queued.
    keys = {"a": 1, "b": 5, "c": 2, "d": 6, "e": 7}
    queue = JavaPriorityQueue(lambda x: keys[x])
    for x in "abcde":
        queue.offer(x)
    keys["d"] = 0
    assert queue.poll() == "a"
    assert queue.poll() == "c"
    assert queue.poll() == "d"


def test_the_constrained_set_puts_rejected_clients_back_and_keeps_each_client_once():
    loads = [3.0, 1.0, 2.0, 0.0]
    queue = ConstrainedPrioritySet(loads, [c * 7 for c in range(4)], [0, 1, 2, 3])
    queue.offer_all([1])  # a second offer re-positions, never duplicates
    assert queue.poll(lambda c: c == 0) == 0  # 3, 1 and 2 were polled first, then put back
    assert queue.poll(lambda c: True) == 3
    assert queue.poll(lambda c: c > 5) is None
    assert [queue.poll(lambda c: True) for _ in range(2)] == [1, 2]
    assert queue.poll(lambda c: True) is None


class _ReplayedSet:
    """ConstrainedPrioritySet written the plain way: every operation on the array, in Java's order."""

    def __init__(self, load, hashes, clients):
        self.load, self.hashes = load, hashes
        self.heap = JavaPriorityQueue(lambda c: (load[c], c))
        self.members = set()
        self.offer_all(clients)

    def offer_all(self, clients):
        for c in clients:
            if c in self.members:
                self.heap.remove(c)
            self.members.add(c)
            self.heap.offer(c)

    def poll(self, constraint):
        rejected, found = [], None
        while len(self.heap):
            c = self.heap.poll()
            self.members.discard(c)
            if constraint(c):
                found = c
                break
            rejected.append(c)
        self.offer_all(java_hash.hash_order(rejected, self.hashes.__getitem__, int))
        return found


def test_the_logging_queue_answers_and_ends_like_the_plain_replay():
    """Movement phases in miniature: poll with a candidate list (most clients admitted, as when
    most are caught up), give the polled client a task, take one from a queued client (what a
    movement does once the warm-up budget is spent), now and then give one to a queued client
    (the most-caught-up path), offer them back. With close loads Kafka's heap goes out of order in
    about one sequence in eight: the test requires that it did, and that both queues yielded the
    same clients and ended with the same array."""
    out_of_order = 0
    for seed in range(300):
        rng = random.Random(seed)
        n = rng.choice([7, 15, 16, 24, 31, 32, 48])
        cap = [rng.choice((1, 1, 1, 2)) for _ in range(n)]
        count = [rng.randint(2, 6) for _ in range(n)]
        load = [count[c] / cap[c] for c in range(n)]
        hashes = [rng.getrandbits(32) for _ in range(n)]
        logging, plain = ConstrainedPrioritySet(load, hashes, range(n)), _ReplayedSet(load, hashes, range(n))
        for _ in range(60):
            admitted = set(rng.sample(range(n), rng.randint(0, n) if rng.random() < 0.2 else rng.randint(n // 2, n)))
            least = min((c for c in plain.members if c in admitted), key=lambda c: (load[c], c), default=None)
            got = logging.poll(admitted.__contains__, sorted(admitted))
            assert got == plain.poll(admitted.__contains__), f"seed {seed}"
            out_of_order += got != least
            if got is None:
                continue
            other = rng.choice([c for c in range(n) if c != got])
            count[got] += 1
            count[other] = max(0, count[other] - 1)
            touched = [got, other]
            if rng.random() < 0.2:
                extra = rng.randrange(n)
                count[extra] += 1
                if extra not in touched:
                    touched.insert(0, extra)
            for c in touched:
                load[c] = count[c] / cap[c]
            logging.offer_all(touched)
            plain.offer_all(touched)
        assert logging.heap_array() == plain.heap._heap, f"seed {seed}"
    assert out_of_order > 0


def test_the_hash_walk_of_random_process_ids_is_insertion_order_within_buckets():
    rng = random.Random(5)
    pids = [f"{rng.getrandbits(32):08x}-0000-4000-8000-{rng.getrandbits(48):012x}" for _ in range(40)]
    walk = java_hash.hash_order(pids, java_hash.process_id_hash, str)
    buckets = {p: java_hash.spread_hash(java_hash.process_id_hash(p)) & 63 for p in pids}
    assert sorted(walk) == sorted(pids)
    assert [buckets[p] for p in walk] == sorted(buckets[p] for p in walk)
    for b in set(buckets.values()):
        assert [p for p in walk if buckets[p] == b] == [p for p in pids if buckets[p] == b]
