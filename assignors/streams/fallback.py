"""Kafka Streams' assignment when the changelog end offsets could not be fetched (Kafka 4.1).

``StreamsPartitionAssignor`` then cannot compute lags and runs ``FallbackPriorTaskAssignor``: a
``LegacyStickyTaskAssignor`` that must keep every previous active where it was, and asks for a
probing rebalance to try again. The sticky assignor is greedy and walks Java hash maps and sets,
so its answer depends on their iteration order; this module replays it with the same containers
(:mod:`.java_hash`):

1. Each previous active stays with the client that ran it (``-2``; if two clients claim one, the
   last in the client map's walk wins).
2. The remaining tasks, in the walk of a copy of the task set: to the first client (in the walk of
   the task's previous-standby set) that held state for it and is below its quota of
   ``tasks // total threads`` actives per thread.
3. The rest, in ``TaskId`` order, through ``findClient``: a previous holder of state unless it is
   full while someone has more room, else the least loaded client (first one with no task at all;
   ties broken by more threads, then by the walk), preferring a client on which the task forms a
   new *pair* with a task already there.
4. Standbys: for each stateful task, in the walk of the stateful task set, ``num.standby.replicas``
   times ``findClient`` among the clients without a copy.

The containers and their fill order are those of ``StreamsPartitionAssignor`` (JDK 17 table sizes):

* clients: a ``HashMap`` by process id, filled in the order the leader met the clients (the spec's
  client order stands for it);
* all tasks: ``partitionsForTask``'s keys, filled subtopology by subtopology (in the walk of a
  ``HashMap`` of subtopologies, itself filled from a ``putAll`` of the topology's subtopologies in id
  order), partitions in ascending order;
* stateful tasks: a ``HashSet`` filled from ``ChangelogTopics``' map, filled subtopology by
  subtopology (the ``putAll`` map's walk), each in the walk of that subtopology's task set.

Previous tasks come from the subscriptions: a task reported at ``-2`` was active, any other
reported task (``-3`` included) is a previous standby. Clients given as ``task_lags`` are read as
Kafka's ``ClientState`` test constructor reads lags: ``-2`` active, a lag ``>= 0`` a standby.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import AssignmentError
from .java_hash import (
    copy_sized,
    hash_order,
    hash_order_after_removals,
    hash_order_of_spread,
    spread_hash,
    process_id_hash,
    put_all_sized,
    subtopology_hash,
    task_id_hash,
)
from .model import task_sort_key

_INT32 = 1 << 32


def _java_int(v: int) -> int:
    v %= _INT32
    return v - _INT32 if v >= 1 << 31 else v


def _task_hash(task: str) -> int:
    return task_id_hash(*task_sort_key(task))


class _LegacyStickyFallback:
    """Single use: ``LegacyStickyTaskAssignor(mustPreserveActiveTaskAssignment=true).assign``.

    Clients are indices in ``ProcessId`` order (their ``compareTo`` rank); tasks are id strings.
    """

    def __init__(self, process_ids: Sequence[str], spec_order: Sequence[int], capacity: Sequence[int],
                 prev_active: Sequence[Sequence[str]], prev_standby: Sequence[Sequence[str]],
                 stateful: Sequence[str], stateless: Sequence[str]):
        self.n = len(process_ids)
        self.cap = list(capacity)
        client_hash = [process_id_hash(p) for p in process_ids]
        self._client_hash = client_hash.__getitem__
        self._client_spread = [spread_hash(h) for h in client_hash]
        self.client_order = self._client_set_order(list(spec_order))
        self.all_tasks, self.stateful_tasks = _kafka_task_sets(stateful, stateless)
        self.all_set = set(self.all_tasks)
        self.active: list[set[str]] = [set() for _ in range(self.n)]
        self.standby: list[set[str]] = [set() for _ in range(self.n)]
        self.count = [0] * self.n
        # Kafka's TaskPairs holds a pair for every two tasks it assigned to one client, and a task
        # never leaves a client here: the pairs of a task are the tasks of the clients holding it.
        # So keep each client's tasks and each task's holders, and only the number of pairs.
        self.tasks_of: list[set[str]] = [set() for _ in range(self.n)]
        self.holders: dict[str, list[int]] = {}
        self.pair_count = 0
        n_tasks = len(self.all_tasks)
        # TaskPairs(maxPairs) in Java int arithmetic; a negative capacity makes Kafka's HashSet throw.
        product = _java_int(n_tasks * (n_tasks - 1))
        self.max_pairs = product // 2 if product >= 0 else -(-product // 2)  # Java's / truncates
        if self.max_pairs < 0:
            raise AssignmentError(
                f"Kafka's fallback assignor cannot run with {n_tasks} tasks: its task-pair set would get"
                f" the capacity {self.max_pairs} (int overflow), and Kafka throws IllegalArgumentException"
            )
        # mapPreviousTaskAssignment, walking the client map.
        self.prev_active_owner: dict[str, int] = {}
        standby_holders: dict[str, list[int]] = {}
        for c in self.client_order:
            for task in sorted(prev_active[c], key=task_sort_key):
                self.prev_active_owner[task] = c
            for task in sorted(prev_standby[c], key=task_sort_key):
                standby_holders.setdefault(task, []).append(c)
        self.prev_standby_holders = {t: self._client_set_order(cs) for t, cs in standby_holders.items()}

    def _client_set_order(self, clients: list[int], table: int = 0) -> list[int]:
        """The walk of a ``HashSet<ProcessId>`` (or the client map) filled in this order."""
        if len(clients) <= 1:
            return clients
        spread = self._client_spread
        return hash_order_of_spread(clients, [spread[c] for c in clients], self._client_hash, int, table)

    # --- ClientState -----------------------------------------------------------------------------

    def _holds(self, c: int, task: str) -> bool:
        return task in self.tasks_of[c]

    def _assign(self, c: int, task: str, active: bool) -> None:
        mine = self.tasks_of[c]
        if mine:  # TaskPairs.addPairs, before the task goes in: pairs with c's tasks not yet paired
            new = mine
            for h in self.holders.get(task, ()):
                new = new - self.tasks_of[h]
            self.pair_count += len(new)
        mine.add(task)
        self.holders.setdefault(task, []).append(c)
        (self.active if active else self.standby)[c].add(task)
        self.count[c] += 1

    def _has_new_pair(self, task: str, c: int) -> bool:
        """``TaskPairs.hasNewPair``: some task on ``c`` was never on one client with ``task``."""
        if self.pair_count == self.max_pairs:
            return False
        rest = self.tasks_of[c]
        for h in self.holders.get(task, ()):
            if not rest:
                break
            rest = rest - self.tasks_of[h]
        return bool(rest)

    # --- LegacyStickyTaskAssignor ----------------------------------------------------------------

    def run(self, num_standby_replicas: int) -> tuple[list[set[str]], list[set[str]]]:
        self._assign_active()
        for task in self.stateful_tasks:
            for _ in range(num_standby_replicas):
                without = [c for c in self.client_order if not self._holds(c, task)]
                if not without:
                    break  # Kafka warns: not enough clients for the standbys
                within = self._client_set_order(without)
                self._assign(self._find_client(task, within), task, active=False)
        return self.active, self.standby

    def _assign_active(self) -> None:
        tasks_per_thread = len(self.all_tasks) // sum(self.cap)
        assigned = []
        # The previous-active map is walked; a task claimed twice kept its first slot.
        for task in hash_order(list(self.prev_active_owner), _task_hash, task_sort_key):
            if task in self.all_set:
                self._assign(self.prev_active_owner[task], task, active=True)  # must preserve: no quota
                assigned.append(task)
        for task in self._unassigned_walk(assigned):
            for c in self.prev_standby_holders.get(task, ()):
                if len(self.active[c]) < self.cap[c] * tasks_per_thread:  # hasUnfulfilledQuota
                    self._assign(c, task, active=True)
                    break
        taken = {t for c in range(self.n) for t in self.active[c]}
        within = self.client_order
        for task in sorted((t for t in self.all_tasks if t not in taken), key=task_sort_key):
            self._assign(self._find_client(task, within), task, active=True)

    def _unassigned_walk(self, assigned: list[str]) -> list[str]:
        """``new HashSet<>(allTaskIds)`` minus the preserved actives, in its walk.

        ``removeAll`` removes through ``HashSet.remove`` (which may reorder a tree bucket) when the
        copy is larger than the removed set; the preserved actives go in the walk of their own
        ``HashSet``, filled in the order they were kept.
        """
        if len(self.all_tasks) <= len(assigned):
            return []  # every task was kept where it was
        return hash_order_after_removals(
            self.all_tasks, hash_order(assigned, _task_hash, task_sort_key),
            _task_hash, task_sort_key, copy_sized(len(self.all_tasks)),
        )

    def _find_client(self, task: str, within: list[int]) -> int:
        if len(within) == 1:
            return within[0]
        previous = self._previous_holder(task, within)
        if previous is None:
            return self._least_loaded(task, within)
        if self._should_balance_load(previous):
            standby = self._least_loaded_previous_standby(task, within)
            if standby is None or self._should_balance_load(standby):
                return self._least_loaded(task, within)
            return standby
        return previous

    def _previous_holder(self, task: str, within: list[int]) -> int | None:
        owner = self.prev_active_owner.get(task)
        if owner is not None and owner in within:
            return owner
        return self._least_loaded_previous_standby(task, within)

    def _least_loaded_previous_standby(self, task: str, within: list[int]) -> int | None:
        holders = self.prev_standby_holders.get(task)
        if holders is None:
            return None
        # new HashSet<>(holders).retainAll(within): a copy (sized from its size), then iterator removal.
        allowed = set(within)
        copy = self._client_set_order(holders, copy_sized(len(holders)))
        return self._least_loaded(task, [c for c in copy if c in allowed])

    def _should_balance_load(self, c: int) -> bool:
        """``shouldBalanceLoad``: ``c`` is full and some client has more available capacity."""
        count, cap = self.count, self.cap
        if count[c] < cap[c]:
            return False
        load, threads = count[c] / cap[c], cap[c]
        return any(n / k < load or (n / k == load and k > threads) for n, k in zip(count, cap))

    def _least_loaded(self, task: str, clients: list[int]) -> int | None:
        found = self._find_least_loaded(task, clients, check_pairs=True)
        return found if found is not None else self._find_least_loaded(task, clients, check_pairs=False)

    def _find_least_loaded(self, task: str, clients: list[int], check_pairs: bool) -> int | None:
        """``findLeastLoaded``: the first client without tasks, else the one with the most available
        capacity (``hasMoreAvailableCapacityThan``: lower load, then more threads; earlier in the
        walk on a tie), among those on which the task forms a new pair if ``check_pairs``."""
        count, cap = self.count, self.cap
        best, best_load, best_threads = None, 0.0, 0
        for c in clients:
            n = count[c]
            if n == 0:
                return c
            load, threads = n / cap[c], cap[c]
            if best is None or load < best_load or (load == best_load and threads > best_threads):
                if not check_pairs or self._has_new_pair(task, c):
                    best, best_load, best_threads = c, load, threads
        return best


def _kafka_task_sets(stateful: Sequence[str], stateless: Sequence[str]) -> tuple[list[str], list[str]]:
    """The walks of Kafka's ``allTasks`` (``partitionsForTask.keySet()``) and ``statefulTasks``."""
    by_subtopology: dict[int, list[str]] = {}
    for t in sorted((*stateful, *stateless), key=task_sort_key):
        by_subtopology.setdefault(task_sort_key(t)[0], []).append(t)
    ids = sorted(by_subtopology)
    # TopologyMetadata: putAll of the builder's subtopologies (id order) into a new HashMap.
    topic_groups = hash_order(ids, subtopology_hash, int, put_all_sized(len(ids)))
    # StreamsPartitionAssignor.sourceTopicsByGroup: a new HashMap filled from that walk.
    source_groups = hash_order(topic_groups, subtopology_hash, int)
    # PartitionGrouper: tasks subtopology by subtopology, partitions ascending.
    all_tasks = hash_order([t for s in source_groups for t in by_subtopology[s]], _task_hash, task_sort_key)
    # populateTasksForMaps: each subtopology's task set, filled in the walk of all tasks.
    per_subtopology: dict[int, list[str]] = {}
    for t in all_tasks:
        per_subtopology.setdefault(task_sort_key(t)[0], []).append(t)
    stateful_set = set(stateful)
    changelog_fill = []
    for s in topic_groups:  # ChangelogTopics.setup walks topicGroups
        walk = hash_order(per_subtopology[s], _task_hash, task_sort_key)
        changelog_fill.extend(t for t in walk if t in stateful_set)
    changelog = hash_order(changelog_fill, _task_hash, task_sort_key)
    return all_tasks, hash_order(changelog, _task_hash, task_sort_key)


def fallback_prior_assignment(
    process_ids: Sequence[str],
    spec_order: Sequence[int],
    capacity: Sequence[int],
    prev_active: Sequence[Sequence[str]],
    prev_standby: Sequence[Sequence[str]],
    stateful: Sequence[str],
    stateless: Sequence[str],
    num_standby_replicas: int,
) -> tuple[list[set[str]], list[set[str]]]:
    """Active and standby tasks per client (indices in ``ProcessId`` order) from Kafka's fallback.

    ``spec_order`` lists the client indices in the order Kafka's leader filled its client map.
    """
    round_ = _LegacyStickyFallback(process_ids, spec_order, capacity, prev_active, prev_standby, stateful, stateless)
    return round_.run(num_standby_replicas)
