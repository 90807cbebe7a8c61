"""Real consumer groups on a real broker, driven on cue, with the collector watching them.

The acceptance tests of issue 7 need what a user has: confluent-kafka consumers in a group that
join and leave, the coordinator deciding the assignment, and the collector polling it into the
monitor's topics. This module provides the pieces:

* :class:`RealGroup`: consumers, one thread each, that poll all the time (a consumer that stops
  polling stops taking part in rebalances); :meth:`RealGroup.join` and :meth:`RealGroup.leave` on
  cue, and :meth:`RealGroup.settle`, which waits until the coordinator's answer and the consumers'
  own assignments agree, so every cue ends in one known real generation.
* :class:`CollectorThread`: the production :class:`CollectorRunner` polling in a thread every
  fraction of a second, keeping every poll's result.
* :func:`predicted`: what this project's assignor computes from one settled real generation to
  the next (the previous actual assignment as owned partitions), to measure agreement without
  the job; :func:`general_builder_answer`, what Kafka's general sticky builder computes instead
  (the measurement behind docs/collector.md's cooperative-sticky explanation).

The tests then run the job available-now over the collector's topics (see ``jobs.py``).
"""

from __future__ import annotations

import json
import logging
import random
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from confluent_kafka import Consumer

from assignors import GroupSpec, MemberSpec, TopicPartition, TopicSpec, assign
from streaming.feeds.collector import CollectorSettings
from streaming.cli.collect import (
    CollectOptions, CollectorRunner, PollFailed, PollResult, admin_client, read_snapshot,
)
from streaming.config import Config

log = logging.getLogger("tests.real_groups")

Assignment = dict[str, frozenset[tuple[str, int]]]  # member id -> its partitions

#: How often the collector polls in these tests: several polls per real rebalance.
COLLECT_INTERVAL_S = 0.4


class RealConsumer(threading.Thread):
    """One confluent-kafka consumer polling in its own thread until told to leave.

    The client is created, polled and closed in this thread only; other threads read the
    ``member_id`` and ``assignment`` it publishes after every poll.
    """

    def __init__(self, config: Mapping[str, object], topics: list[str], name: str):
        super().__init__(name=name, daemon=True)
        self.config = dict(config)
        self.topics = topics
        self.member_id: str | None = None
        self.assignment: frozenset[tuple[str, int]] = frozenset()
        self.errors: list[str] = []
        self._leave = threading.Event()
        self._started = threading.Event()

    def run(self) -> None:
        consumer = Consumer({**self.config, "error_cb": lambda err: self.errors.append(str(err))})
        consumer.subscribe(self.topics)
        self._started.set()
        try:
            while not self._leave.is_set():
                consumer.poll(0.1)
                try:
                    self.member_id = consumer.memberid() or None
                except Exception:  # not in a group yet
                    self.member_id = None
                self.assignment = frozenset((tp.topic, tp.partition) for tp in consumer.assignment())
        finally:
            consumer.close()  # sends LeaveGroup: a clean departure

    def leave(self) -> None:
        self._leave.set()
        self.join(timeout=60)
        if self.is_alive():
            raise AssertionError(f"consumer {self.name} did not close within 60 s")

    def abandon(self) -> None:
        """Tell the thread to close its client and do not wait: a stuck client may take long."""
        self._leave.set()


#: The consumer loop of :class:`CrashableConsumer`'s child process: it prints its member id and
#: assignment (one JSON line) whenever they change, until it is killed.
_CHILD_CONSUMER = """
import json, sys
from confluent_kafka import Consumer
config, topics = json.loads(sys.argv[1]), json.loads(sys.argv[2])
consumer = Consumer(config)
consumer.subscribe(topics)
last = None
while True:
    consumer.poll(0.1)
    try:
        member_id = consumer.memberid() or None
    except Exception:
        member_id = None
    now = [member_id, sorted([tp.topic, tp.partition] for tp in consumer.assignment())]
    if now != last:
        print(json.dumps(now), flush=True)
        last = now
"""


class CrashableConsumer:
    """A consumer in a child process, so that it can crash: SIGKILL sends no LeaveGroup, and the
    coordinator expels the member only when its session times out. Same surface as
    :class:`RealConsumer` (``member_id``, ``assignment``, ``config``, ``name``, ``leave``)."""

    def __init__(self, config: Mapping[str, object], topics: list[str], name: str):
        self.config, self.topics, self.name = dict(config), topics, name
        self.errors: list[str] = []  # its client's errors stay in the child process
        self.member_id: str | None = None
        self.assignment: frozenset[tuple[str, int]] = frozenset()
        self._process: subprocess.Popen | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _CHILD_CONSUMER, json.dumps(self.config), json.dumps(self.topics)],
            stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._follow, name=f"{self.name}-stdout", daemon=True).start()

    def _follow(self) -> None:
        for line in self._process.stdout:
            member_id, partitions = json.loads(line)
            self.member_id, self.assignment = member_id, frozenset((t, p) for t, p in partitions)

    def crash(self) -> None:
        self._process.kill()
        self._process.wait(timeout=30)

    def leave(self) -> None:  # a crashed or crashing member leaves no other way in these tests
        if self._process.poll() is None:
            self.crash()

    abandon = leave


@dataclass
class Settled:
    """One real generation as the coordinator reported it once the group was stable."""

    members: tuple[str, ...]  # member ids, sorted
    assignment: Assignment
    assignor: str | None
    at: float = field(default_factory=time.monotonic)


class RealGroup:
    """A consumer group of real consumers on one cluster, all subscribed to the same topics."""

    def __init__(self, bootstrap: str, group_id: str, topics: Mapping[str, int], *,
                 strategy: str | None = None, group_protocol: str = "classic",
                 remote_assignor: str | None = None, consumer_config: Mapping[str, object] | None = None):
        if group_protocol not in ("classic", "consumer"):
            raise ValueError(f"group_protocol must be 'classic' or 'consumer', got {group_protocol!r}")
        if group_protocol == "consumer" and strategy:
            raise ValueError("a KIP-848 group (group.protocol=consumer) has no client-side strategy")
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.topics = dict(topics)
        self.group_protocol = group_protocol
        config: dict[str, object] = {
            "bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "log_level": 0, "group.protocol": group_protocol,
            # Pick up a topic that is new to the broker soon, not after librdkafka's 5 minutes.
            "topic.metadata.refresh.interval.ms": 2000}
        if strategy:
            config["partition.assignment.strategy"] = strategy
        if remote_assignor:
            config["group.remote.assignor"] = remote_assignor
        config.update(consumer_config or {})
        self.config = config
        self.consumers: list[RealConsumer] = []
        self.generations: list[Settled] = []
        self._admin = admin_client({"bootstrap.servers": bootstrap})
        self._pattern = re.compile(re.escape(group_id))
        self._count = 0
        self._wait_for_topics()

    def _wait_for_topics(self, timeout_s: float = 60.0) -> None:
        """A consumer that subscribes before a new topic is in the broker's metadata leaves it out
        of the group until its next metadata refresh (minutes): wait until every topic shows."""
        deadline = time.monotonic() + timeout_s
        while True:
            metadata = self._admin.list_topics(timeout=10)
            have = {t: len(m.partitions) for t, m in metadata.topics.items() if m.error is None}
            if all(have.get(t) == n for t, n in self.topics.items()):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"topics {self.topics} not all in metadata within {timeout_s:.0f} s: {have}")
            time.sleep(0.2)

    @property
    def all_partitions(self) -> frozenset[tuple[str, int]]:
        return frozenset((t, p) for t, n in self.topics.items() for p in range(n))

    def join(self, n: int = 1, *, static: bool = False, crashable: bool = False) -> list[RealConsumer]:
        """``n`` new consumers; ``static``: each with a group.instance.id of its own (KIP-345);
        ``crashable``: each in a child process (:class:`CrashableConsumer`, see :meth:`crash`)."""
        new = []
        for _ in range(n):
            self._count += 1
            name = f"{self.group_id}-c{self._count}"
            config = {**self.config, "client.id": name}
            if static:
                config["group.instance.id"] = f"{name}-instance"
            new.append(self._start(config, name, crashable))
        return new

    def crash(self, consumer: CrashableConsumer) -> None:
        """Kill ``consumer``'s process: no LeaveGroup; the coordinator expels it after its session
        timeout (then :meth:`settle` sees the group without it)."""
        consumer.crash()
        self.consumers.remove(consumer)

    def _start(self, config: Mapping[str, object], name: str, crashable: bool = False) -> RealConsumer:
        c = (CrashableConsumer if crashable else RealConsumer)(config, sorted(self.topics), name)
        c.start()
        self.consumers.append(c)
        return c

    def restart(self, consumer: RealConsumer) -> RealConsumer:
        """Close ``consumer`` and start it again with the same configuration: a static member
        (group.instance.id) sends no LeaveGroup, and comes back under a new member id."""
        self.leave([consumer])
        return self._start(consumer.config, f"{consumer.name}-restarted")

    def leave(self, consumers: Iterable[RealConsumer]) -> None:
        for c in list(consumers):
            c.leave()
            self.consumers.remove(c)

    def leave_random(self, n: int, rng: random.Random) -> list[RealConsumer]:
        gone = rng.sample(self.consumers, n)
        self.leave(gone)
        return gone

    def describe(self):
        """The coordinator's view of the group; ``None`` while the cluster cannot say."""
        for _ in range(2):
            try:
                return read_snapshot(self._admin, 0, self._pattern, 10.0).groups.get(self.group_id)
            except PollFailed:  # a broker still starting, a coordinator still loading
                # A client that lived through a broker restart can stay stuck on the old
                # coordinator connection (seen with librdkafka 2.16): ask again with a fresh one.
                self._admin = admin_client({"bootstrap.servers": self.bootstrap})
        return None

    def _settled_view(self) -> Settled | None:
        mine = {c.member_id: c.assignment for c in self.consumers}
        if None in mine or len(mine) != len(self.consumers):
            return None
        g = self.describe()
        if g is None or g.state.upper() != "STABLE":
            return None
        described = {m.member_id: frozenset(m.assignment or ()) for m in g.members}
        if set(described) != set(mine):
            return None
        if self.group_protocol == "consumer":
            # Settled = every member has reached its target.
            if any(frozenset(m.target_assignment or ()) != described[m.member_id] for m in g.members):
                return None
        if any(described[mid] != mine[mid] for mid in mine):
            return None
        held = [tp for tps in described.values() for tp in tps]
        if len(held) != len(set(held)) or set(held) != self.all_partitions:
            return None  # a cooperative round that withholds moving partitions is not the end
        return Settled(tuple(sorted(described)), described, g.partition_assignor)

    def settle(self, timeout_s: float = 120.0, *, replace_stuck_after_s: float | None = None) -> Settled:
        """Wait until the group is stable with exactly the live consumers, every partition held
        once, and the coordinator's view equal to each consumer's own; record it.

        ``replace_stuck_after_s``: a consumer still outside the group (no member id) that long
        into the wait is closed without waiting and replaced by a new one. For waits after the
        cluster restarted: a librdkafka consumer can stay stuck on its dead connection and never
        send JoinGroup again (seen once in CI with librdkafka 2.x: two of three consumers rejoined
        2 s after the restart, the third not in 4 minutes); a real application would restart it."""
        deadline = time.monotonic() + timeout_s
        outside_since: dict[object, float] = {}  # consumer -> when this wait first saw it outside
        while time.monotonic() < deadline:
            if replace_stuck_after_s is not None:
                self._replace_stuck(outside_since, replace_stuck_after_s)
            view = self._settled_view()
            if view is not None:
                if not self.generations or self.generations[-1].assignment != view.assignment:
                    self.generations.append(view)
                return view
            time.sleep(0.2)
        mine = {c.name: (c.member_id, sorted(c.assignment)) for c in self.consumers}
        raise AssertionError(f"group {self.group_id} did not settle within {timeout_s:.0f} s: "
                             f"coordinator says {self.describe()}, consumers say {mine}")

    def _replace_stuck(self, outside_since: dict[object, float], after_s: float) -> None:
        now = time.monotonic()
        for c in list(self.consumers):
            if c.member_id is not None:
                outside_since.pop(c, None)
                continue
            since = outside_since.setdefault(c, now)
            if now - since < after_s:
                continue
            log.warning("consumer %s has had no member id for %.0f s (client errors: %s): replacing it",
                        c.name, now - since, c.errors[-5:])
            self.consumers.remove(c)
            c.abandon()
            self._start(c.config, f"{c.name}-replaced")

    def close(self) -> None:
        for c in list(self.consumers):
            try:
                c.leave()
            except AssertionError as exc:
                log.warning("%s", exc)
        self.consumers = []


class CollectorThread(threading.Thread):
    """The production collector (``CollectorRunner.step``) polling every ``interval_s`` in a thread."""

    def __init__(self, options: CollectOptions, settings: CollectorSettings | None = None,
                 runner: CollectorRunner | None = None):
        super().__init__(name="collector", daemon=True)
        self.runner = runner or CollectorRunner(options, settings)
        self.interval_s = options.interval_s
        self.results: list[PollResult] = []
        #: After every poll, the collector's view of the groups (what the job has been told).
        self.views: list[dict] = []
        self._stop_event = threading.Event()
        self.crashed: BaseException | None = None

    def run(self) -> None:
        try:
            while not self._stop_event.is_set():
                self.results.append(self.runner.step())
                self.views.append(dict(self.runner.collector.views))
                self._stop_event.wait(self.interval_s)
        except BaseException as exc:  # surfaced by stop()
            self.crashed = exc

    def polls_after(self, n: int, timeout_s: float = 60.0) -> None:
        """Wait for ``n`` more good polls (so the job's clock moves past what came before)."""
        target = sum(r.ok for r in self.results) + n
        deadline = time.monotonic() + timeout_s
        while sum(r.ok for r in self.results) < target:
            if self.crashed or not self.is_alive():
                raise AssertionError(f"the collector stopped: {self.crashed!r}")
            if time.monotonic() > deadline:
                errors = [r.error for r in self.results if not r.ok][-3:]
                raise AssertionError(f"fewer than {n} good polls within {timeout_s:.0f} s; last errors: {errors}")
            time.sleep(0.05)

    def events(self) -> list[dict]:
        """Every event the collector delivered, in order (membership and heartbeats)."""
        return [{"kind": e.kind, **e.value} for r in self.results if r.ok for e in r.events]

    def stop(self) -> list[PollResult]:
        self._stop_event.set()
        self.join(timeout=120)
        if self.crashed:
            raise AssertionError(f"the collector crashed: {self.crashed!r}") from self.crashed
        return self.results


#: A KIP-848 group's script: +k = k members join, -k = the k oldest leave.
KIP848_STEPS = (1, 1, 2, -1, 1, -2)


def play_steps(group: "RealGroup", steps=KIP848_STEPS, after_each=lambda: None) -> None:
    """Play ``steps`` on ``group``, settling after each change; joins one member at a time, so that
    the join order is the coordinator's."""
    for step in steps:
        if step > 0:
            for _ in range(step):
                group.join(1)
                group.settle()
        else:
            group.leave(group.consumers[:-step])
            group.settle()
        after_each()


def collect_options(config: Config, observed_bootstrap: str, *group_ids: str,
                    interval_s: float = COLLECT_INTERVAL_S, timeout_s: float = 5.0) -> CollectOptions:
    """The collector watching ``group_ids`` on ``observed_bootstrap`` and writing to the job's topics."""
    return CollectOptions(
        source={"bootstrap.servers": observed_bootstrap},
        monitor_bootstrap_servers=config.kafka.bootstrap_servers, monitor_options={},
        membership_topic=config.kafka.membership_topic, heartbeat_topic=config.kafka.heartbeat_topic,
        group_pattern=re.compile("|".join(re.escape(g) for g in group_ids)), interval_s=interval_s,
        timeout_s=timeout_s)


# -- what our assignors say, for the measurement --------------------------------------------------

def predicted(assignor: str, previous: Assignment, members: Iterable[str],
              topics: Mapping[str, int]) -> Assignment:
    """The final assignment this project's ``assignor`` computes for ``members`` when each member
    that was in the previous real generation owns what it held there (new members own nothing).

    For cooperative assignors the partitions withheld in the revocation round are added back: a
    settled real group has finished its follow-up round too.
    """
    ordered = sorted(members)
    spec = GroupSpec(
        members=tuple(MemberSpec(member_id=m, topics=tuple(sorted(topics)),
                                 owned_partitions=tuple(TopicPartition(t, p) for t, p in sorted(previous.get(m, ()))),
                                 generation=1 if m in previous else -1)
                      for m in ordered),
        topics={t: TopicSpec(t, n) for t, n in topics.items()})
    result = assign(spec, assignor)
    out = {m: set(result.assignment.get(m, ())) for m in ordered}
    for tp, m in result.transferring.items():
        out[m].add(tp)
    return {m: frozenset((tp.topic, tp.partition) for tp in tps) for m, tps in out.items()}


def differing(expected: Assignment, actual: Assignment) -> list[tuple[str, int, str | None, str | None]]:
    """(topic, partition, expected owner, actual owner) for every partition whose owner differs."""
    owner_e = {tp: m for m, tps in expected.items() for tp in tps}
    owner_a = {tp: m for m, tps in actual.items() for tp in tps}
    return sorted((t, p, owner_e.get((t, p)), owner_a.get((t, p)))
                  for t, p in set(owner_e) | set(owner_a) if owner_e.get((t, p)) != owner_a.get((t, p)))


def moved(previous: Assignment, current: Assignment) -> int:
    """Partitions that changed owner between two generations (departed members' ones count)."""
    before = {tp: m for m, tps in previous.items() for tp in tps}
    return sum(1 for m, tps in current.items() for tp in tps if tp in before and before[tp] != m)


def general_builder_answer(previous: Assignment, members: Iterable[str], topics: Mapping[str, int]) -> Assignment:
    """Kafka's *general* sticky builder (our port, ``assignors.sticky._kafka_general``) run on a group
    whose members all subscribe to the same topics, where Kafka itself uses the constrained builder.

    librdkafka's sticky assignor is a port of Kafka's sticky assignor from before the constrained
    builder existed (KAFKA-9987, Kafka 2.8), so this is the hypothesis for what a real librdkafka
    group computes; docs/collector.md reports how well it holds.
    """
    from assignors.sticky._kafka_general import kafka_general
    from assignors.sticky._layout import build_layout, collect_claims, hashmap_visit_order, partition_objects
    from assignors.sticky._ownership import resolve_ownership
    from assignors.sticky._racks import rack_info

    ordered = sorted(members)
    spec = GroupSpec(
        members=tuple(MemberSpec(member_id=m, topics=tuple(sorted(topics)),
                                 owned_partitions=tuple(TopicPartition(t, p) for t, p in sorted(previous.get(m, ()))),
                                 generation=1 if m in previous else -1)
                      for m in ordered),
        topics={t: TopicSpec(t, n) for t, n in topics.items()})
    layout = build_layout(spec)
    claims = collect_claims(spec.members, layout)
    visit = hashmap_visit_order(ordered)
    resolve_ownership(spec.members, visit, claims)
    owner = kafka_general(spec.members, layout, claims, rack_info(spec, spec.members, layout), visit)
    objects = partition_objects(layout, claims)
    out: dict[str, set] = {m: set() for m in ordered}
    for g, position in enumerate(owner.tolist()):
        out[ordered[position]].add((objects[g].topic, objects[g].partition))
    return {m: frozenset(tps) for m, tps in out.items()}


# -- topics whose ids share a bucket of the coordinator's HashMap ---------------------------------

def topics_with_colliding_ids(bootstrap: str, prefix: str, partitions: tuple[int, int, int],
                              candidates: int = 8) -> dict[str, int]:
    """Three topics (``<prefix>-a``, ``-b``, ``-c`` in name order, with ``partitions``) where b's
    and c's ids share a bucket of the coordinator's HashMap<Uuid>: there, only the order in which
    the coordinator listed a target says which of them Kafka's uniform assignor walks first (the
    flaky case of issue 16). The broker picks ids at random, so ``candidates`` b and c topics are
    created and a colliding pair is kept, one where the coordinator will list c before b and that
    order decides a target if there is one (8 x 8 pairs: none collide in about 1.6% of runs, and
    then the run is an ordinary one; printed); the rest are deleted."""
    from confluent_kafka import KafkaException
    from confluent_kafka._model import TopicCollection

    from assignors.java_order import bucket_index, uuid_hash
    from assignors.model import topic_id_from_string
    from streaming.cli.collect import admin_client, topic_snapshot
    from streaming.feeds.kafka_io import delete_topics, ensure_topics

    a, b, c = partitions
    bs = [f"{prefix}-b{i}" for i in range(candidates)]
    cs = [f"{prefix}-c{i}" for i in range(candidates)]
    ensure_topics(bootstrap, [f"{prefix}-a"], partitions=a)
    ensure_topics(bootstrap, bs, partitions=b)
    ensure_topics(bootstrap, cs, partitions=c)
    admin = admin_client({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:  # a topic just created may not be in the broker's metadata yet
        try:
            described = admin.describe_topics(TopicCollection([f"{prefix}-a"] + bs + cs))
            ids = {t: topic_snapshot(f.result(timeout=30)).topic_id for t, f in described.items()}
            break
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    bucket = {t: bucket_index(uuid_hash(topic_id_from_string(ids[t]))) for t in bs + cs}
    colliding = [(x, y) for x in bs for y in cs if bucket[x] == bucket[y]]
    decisive = [pair for pair in colliding if _listed_against_name_order_decides(
        {f"{prefix}-a": a, pair[0]: b, pair[1]: c}, ids)]
    pair = (decisive or colliding or [(bs[0], cs[0])])[0]
    print(f"topic ids: {len(colliding)} colliding pairs of {candidates * candidates}, {len(decisive)} where the "
          f"coordinator lists c before b and that decides the second member's target; kept {pair}")
    delete_topics(bootstrap, [t for t in bs + cs if t not in pair])
    return {f"{prefix}-a": a, pair[0]: b, pair[1]: c}


def _listed_against_name_order_decides(topics: dict[str, int], ids: Mapping[str, str]) -> bool:
    """Whether the coordinator, assigning ``topics`` (a, b, c by name) to a first member alone, lists
    c before b in its target, and whether that order, rather than name order, decides what uniform
    leaves it when a second member joins. The fresh homogeneous builder walks the topics in
    HashSet<Uuid> order and adds each to the target with ``HashMap.computeIfAbsent``, which puts a
    new key at the head of its bucket: two ids sharing a bucket come out in reverse walk order."""
    from assignors.java_order import bucket_index, string_hash
    from assignors.model import topic_id_from_string
    from assignors.server_group import server_group

    from tests.stories import uniform_after_second_join

    specs = {n: TopicSpec(n, k, topic_id=topic_id_from_string(ids[n])) for n, k in topics.items()}
    a, b, c = names = tuple(topics)
    if bucket_index(string_hash(b)) == bucket_index(string_hash(c)):
        # The joining member's HashSet of names is filled in the order its client listed them (the
        # type-5 record sorts them): with b and c in one bucket, that unseen order decides the walk.
        return False
    walk = server_group(GroupSpec(members=(MemberSpec("m1", names),), topics=specs)).homogeneous_topics
    if walk.index(b) > walk.index(c):  # listed b before c: name order, nothing to tell apart
        return False

    def second_join(order):
        return uniform_after_second_join([(t, p) for t in order for p in range(topics[t])], specs)
    return second_join((c, b, a)) != second_join((a, b, c))


def listed_topic_orders(collector: "CollectorThread") -> list[tuple[str, ...]]:
    """Each distinct order of topics in which the coordinator listed a member's target assignment,
    as the collector saw it (what says whether a run exercised the colliding ids against name order)."""
    orders: list[tuple[str, ...]] = []
    for view in collector.views:
        for g in view.values():
            for m in g.members.values():
                order = tuple(dict.fromkeys(t for t, _ in m.target or ()))
                if len(order) > 1 and order not in orders:
                    orders.append(order)
    return orders
