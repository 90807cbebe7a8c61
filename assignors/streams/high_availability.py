"""Kafka Streams' ``HighAvailabilityTaskAssignor`` (KIP-441; spec 4.2), as Kafka 4.1 ships it.

Followed: Kafka 4.1.1 (``HighAvailabilityTaskAssignor``, ``TaskMovement``, ``ConstrainedPrioritySet``,
``DefaultStandbyTaskAssignor``, ``ClientTagAwareStandbyTaskAssignor``, and ``StreamsPartitionAssignor``'s
choice of ``FallbackPriorTaskAssignor``), checked against its jar by the differential test.

Guarantees, in priority order: every task has exactly one active; no client holds two copies of a
task; a stateful active goes to a *caught-up* client when one exists (so processing resumes
without a long restore), balance comes second and is reached over successive *probing*
rebalances while warm-up replicas restore state on the clients that should end up with the tasks.

Phases (clients in ``ProcessId`` order, tasks in ``TaskId`` order):

1. Stateful actives round-robin over clients, ignoring state; then ``balanceTasksOverThreads``
   moves tasks while that strictly reduces the per-thread skew.
2. Standbys: least-loaded client without a copy (default), or spread over client-tag values
   (KIP-708, when ``rack_aware_assignment_tags`` is set); then balanced over threads (tag-aware:
   only between clients with the same tags). Tag-aware standbys that found no distinct tag value
   go to the least loaded clients afterwards, in the walk of Kafka's ``HashMap`` of task ids
   (:mod:`.java_hash`), not in ``TaskId`` order.
3. Active task movements: an active on a client that is not caught up, where another client is
   more caught up, goes to a caught-up standby (swap), else the least-loaded caught-up client,
   else the most caught-up client; the intended owner keeps a *warm-up* copy while the shared
   budget of ``max_warmup_replicas`` lasts.
4. Standby movements likewise (warm-ups are left alone), drawing on the same budget.
5. Stateless tasks to the client with the least active load.
6. A probing rebalance is scheduled (``now + probing.rebalance.interval.ms``) iff any move was needed.

Java details that decide answers and are reproduced:

* Loads are ``double`` divisions (Python floats are the same IEEE doubles).
* Movements are processed in the order Kafka *polls* them from a ``java.util.PriorityQueue``
  ordered by (caught-up client count, task) only; several standby movements of one task compare
  equal and come out in the order the queue's sifts leave them (:mod:`.java_queue`).
* The movement phases pick clients from a ``PriorityQueue`` whose comparator reads loads that
  change while the clients are queued (a destination loses a task once the warm-up budget is
  spent). Its heap then goes out of order and it may yield a client that is not the least loaded;
  :mod:`.java_queue` keeps the same heap array and sifts it as Java does. The other phases change a
  client's load only while it is out of the queue, so there the queue's order is the true
  (load, ``ProcessId``) order and a plain heap gives the same answer faster.
* A lag of ``-3`` (``UNKNOWN_OFFSET_SUM``: the client could not read its offsets) is a lag like any
  other for this assignor, as in Kafka: never caught up, yet ranked ahead of every real lag.
* When the changelog end offsets could not be fetched (clients report offset sums, the spec has no
  end offsets), Kafka's ``StreamsPartitionAssignor`` runs ``FallbackPriorTaskAssignor`` instead and
  asks for a probing rebalance at ``now + probing.rebalance.interval.ms``: see :mod:`.fallback`.

Not here, on purpose:

* ``balance.factor`` never shipped: it was in the KIP and briefly on trunk, and was removed
  (KAFKA-6145, PR #8597) before 2.6. Kafka moves a task whenever that strictly reduces the
  per-thread skew, and so do we.
* Rack-aware min-cost-flow optimisation of actives and standbys (KIP-925,
  ``rack.aware.assignment.strategy``) is left out; with it off (Kafka's default) the result is exact.
"""

from __future__ import annotations

import functools
import heapq
from typing import Callable, Iterable

import numpy as np

from ..errors import AssignmentError
from .fallback import fallback_prior_assignment
from .java_hash import hash_order_after_removals, process_id_hash, task_id_hash
from .java_queue import ConstrainedPrioritySet, java_priority_queue_order
from .model import (
    LATEST_OFFSET,
    LONG_MAX,
    UNKNOWN_OFFSET_SUM,
    InvalidStreamsSpecError,
    StreamsAssignment,
    StreamsClientAssignment,
    StreamsGroupSpec,
    process_id_sort_keys,
    task_sort_key,
)


class _LoadQueue:
    """Kafka's ``ConstrainedPrioritySet`` where no queued client's load changes: clients by
    (load, id), polled subject to a constraint.

    Used by the standby and stateless phases, which change only the load of the client just
    polled (out of the queue) before offering it again. Kafka's heap then stays a heap, so it yields
    clients in true (load, id) order, and the array layout (which :mod:`.java_queue` would track)
    cannot change an answer. Lazy deletion: an entry is live while it matches the client's current
    key. Clients rejected by the constraint during one poll go back in afterwards, as in Kafka.
    """

    __slots__ = ("_heap", "_current", "_load")

    def __init__(self, load: Callable[[int], float]):
        self._heap: list[tuple[float, int]] = []
        self._current: dict[int, float] = {}
        self._load = load

    def offer(self, client: int) -> None:
        key = self._load(client)
        if self._current.get(client) == key:
            return
        self._current[client] = key
        heapq.heappush(self._heap, (key, client))

    def offer_all(self, clients: Iterable[int]) -> None:
        for c in clients:
            self.offer(c)

    def poll(self, constraint: Callable[[int], bool] | None = None) -> int | None:
        rejected = []
        found = None
        heap, current = self._heap, self._current
        while heap:
            key, client = heapq.heappop(heap)
            if current.get(client) != key:
                continue  # stale entry
            del current[client]
            if constraint is None or constraint(client):
                found = client
                break
            rejected.append(client)
        for c in rejected:
            self.offer(c)
        return found


class _HighAvailabilityRound:
    """Single-use: the state of one assignment, with clients and tasks as dense integer indices."""

    def __init__(self, spec: StreamsGroupSpec):
        self.spec = spec
        self.config = spec.config
        keys = process_id_sort_keys([c.process_id for c in spec.clients])
        order = sorted(range(len(spec.clients)), key=lambda i: keys[i])
        self.clients = [spec.clients[i] for i in order]
        self.n = len(self.clients)
        self._spec_positions = order
        self.cap = [c.capacity for c in self.clients]
        self.capf = np.asarray(self.cap, dtype=np.float64)

        self.stateful = sorted(spec.stateful_tasks, key=task_sort_key)
        self.stateless = sorted(spec.stateless_tasks, key=task_sort_key)
        self.task_names = self.stateful + self.stateless
        self.n_stateful = len(self.stateful)

        self.active: list[set[int]] = [set() for _ in range(self.n)]
        self.standby: list[set[int]] = [set() for _ in range(self.n)]
        self.n_assigned = [0] * self.n
        #: n_assigned / capacity per client, for the movement queue (see _movement_queue).
        self.load: list[float] = []
        #: Standby copies kept only to warm a client up (Kafka's ``warmups`` plus kept standby-move copies).
        self.warmups: list[set[int]] = [set() for _ in range(self.n)]
        # Kafka computes lags only once it has the changelog end offsets; when the fetch failed
        # (no end offsets, yet clients report offset sums) StreamsPartitionAssignor falls back.
        self.end_offsets_missing = (
            spec.task_end_offset_sums is None
            and bool(self.stateful)
            and any(c.task_lags is None for c in self.clients)
        )
        self._build_lags()
        self._cache_caught_up: dict[int, list[int]] = {}
        self._cache_min_lag: dict[int, int] = {}
        self._cache_by_lag: dict[int, list[int]] = {}

    @property
    def spec_order(self) -> list[int]:
        """Client indices (``ProcessId`` order) in spec order: the order Kafka's leader filled its client map."""
        rank = {spec_index: i for i, spec_index in enumerate(self._spec_positions)}
        return [rank[j] for j in range(self.n)]

    @functools.cached_property
    def client_hash(self) -> list[int]:
        """``ProcessId.hashCode`` per client; only the Java walks need it, and most rounds have none."""
        return [process_id_hash(c.process_id) for c in self.clients]

    # --- lags (spec 4.1) ------------------------------------------------------------------------

    def _build_lags(self) -> None:
        """Per task: explicit lags by client, and the lag of clients that reported no state."""
        spec = self.spec
        index = {t: i for i, t in enumerate(self.stateful)}
        self.explicit: list[dict[int, int]] = [dict() for _ in self.stateful]
        ends = spec.task_end_offset_sums
        self.default_lag = [0] * self.n_stateful
        if ends is not None:
            for t, i in index.items():
                if t not in ends:
                    raise InvalidStreamsSpecError(f"task_end_offset_sums has no end offset sum for stateful task {t!r}")
                self.default_lag[i] = ends[t]
        for ci, client in enumerate(self.clients):
            if client.task_lags is not None:
                for t, i in index.items():
                    if t not in client.task_lags:
                        raise InvalidStreamsSpecError(
                            f"client {client.process_id!r} gives task_lags but none for stateful task {t!r}"
                        )
                    self.explicit[i][ci] = client.task_lags[t]
                continue
            for t, offset_sum in client.task_offset_sums.items():
                i = index.get(t)
                if i is None:
                    continue  # state of a task that is no longer stateful in the topology
                if offset_sum == LATEST_OFFSET or offset_sum == UNKNOWN_OFFSET_SUM:
                    # ClientState.computeTaskLags keeps both sentinels as lags: -3 is not caught up,
                    # yet ranks ahead of every real lag (and of -2) in tasksToClientByLag.
                    lag = offset_sum
                elif ends is None:
                    lag = UNKNOWN_OFFSET_SUM  # only with end offsets missing, where lags go unused
                else:
                    end = ends[t]
                    # A store ahead of the changelog end (e.g. after the topic was recreated) restores from scratch.
                    lag = end if end < offset_sum else end - offset_sum
                self.explicit[i][ci] = lag

    def lag(self, client: int, task: int) -> int:
        return self.explicit[task].get(client, self.default_lag[task])

    def _is_caught_up_lag(self, lag: int) -> bool:
        acceptable = self.config.acceptable_recovery_lag
        return lag == LATEST_OFFSET or acceptable == LONG_MAX or 0 <= lag <= acceptable

    def caught_up(self, client: int, task: int) -> bool:
        return self._is_caught_up_lag(self.lag(client, task))

    def caught_up_clients(self, task: int) -> list[int]:
        cached = self._cache_caught_up.get(task)
        if cached is None:
            explicit = self.explicit[task]
            if len(explicit) < self.n and self._is_caught_up_lag(self.default_lag[task]):
                cached = [c for c in range(self.n) if self.caught_up(c, task)]
            else:
                cached = sorted(c for c, lag in explicit.items() if self._is_caught_up_lag(lag))
            self._cache_caught_up[task] = cached
        return cached

    def min_lag(self, task: int) -> int:
        cached = self._cache_min_lag.get(task)
        if cached is None:
            explicit = self.explicit[task]
            candidates = list(explicit.values())
            if len(explicit) < self.n:
                candidates.append(self.default_lag[task])
            cached = min(candidates)
            self._cache_min_lag[task] = cached
        return cached

    def clients_by_lag(self, task: int) -> list[int]:
        cached = self._cache_by_lag.get(task)
        if cached is None:
            cached = sorted(range(self.n), key=lambda c: (self.lag(c, task), c))
            self._cache_by_lag[task] = cached
        return cached

    def needs_to_move(self, client: int, task: int) -> bool:
        """Not caught up on ``client`` while some client is strictly more caught up."""
        if self.caught_up(client, task):
            return False
        return self.min_lag(task) < self.lag(client, task)

    # --- bookkeeping ----------------------------------------------------------------------------

    def assigned_load(self, client: int) -> float:
        return self.n_assigned[client] / self.cap[client]

    def active_load(self, client: int) -> float:
        return len(self.active[client]) / self.cap[client]

    def holds(self, client: int, task: int) -> bool:
        return task in self.active[client] or task in self.standby[client]

    def add_active(self, c: int, t: int) -> None:
        self.active[c].add(t)
        self.n_assigned[c] += 1

    def remove_active(self, c: int, t: int) -> None:
        self.active[c].remove(t)
        self.n_assigned[c] -= 1

    def add_standby(self, c: int, t: int) -> None:
        self.standby[c].add(t)
        self.n_assigned[c] += 1

    def remove_standby(self, c: int, t: int) -> None:
        self.standby[c].remove(t)
        self.n_assigned[c] -= 1

    # --- phases -----------------------------------------------------------------------------------

    def run(self) -> StreamsAssignment:
        if self.end_offsets_missing:
            return self._fallback_prior_assignment()
        for t in range(self.n_stateful):
            self.add_active(t % self.n, t)
        self._balance_over_threads(self.active, self.remove_active, self.add_active, None)

        if self.config.num_standby_replicas > 0:
            if self.config.rack_aware_assignment_tags:
                self._assign_standbys_tag_aware()
                allowed = self._same_tags
            else:
                self._assign_standbys_default()
                allowed = None
            self._balance_over_threads(self.standby, self.remove_standby, self.add_standby, allowed)

        self.budget = self.config.max_warmup_replicas
        active_moves = self._active_task_movements()
        standby_moves = self._standby_task_movements()
        self._assign_stateless()
        probing = active_moves + standby_moves > 0
        return self._result(probing, fallback=False)

    def _should_move(self, src: int, dst: int) -> bool:
        """Kafka's ``shouldMoveATask``: the move must strictly reduce a positive per-thread skew."""
        a_s, a_d, c_s, c_d = self.n_assigned[src], self.n_assigned[dst], self.cap[src], self.cap[dst]
        skew = a_s / c_s - a_d / c_d
        if skew <= 0:
            return False
        proposed = (a_s - 1.0) / c_s - (a_d + 1.0) / c_d
        return 0 <= proposed < skew

    def _balance_over_threads(self, tasks_of, unassign, assign, allowed) -> None:
        keep_balancing = True
        while keep_balancing:
            keep_balancing = False
            for src in range(self.n):
                # Only clients less loaded than the source can receive, and the source only gets
                # lighter during its turn: computing them once per source keeps the sweep exact.
                loads = np.asarray(self.n_assigned, dtype=np.float64) / self.capf
                candidates = np.flatnonzero(loads < loads[src])
                for dst in candidates.tolist():
                    if not self._should_move(src, dst):
                        continue
                    if allowed is not None and not allowed(src, dst):
                        continue
                    dst_active, dst_standby = self.active[dst], self.standby[dst]
                    for task in sorted(tasks_of[src]):
                        if not self._should_move(src, dst):
                            break
                        if task in dst_active or task in dst_standby:
                            continue
                        unassign(src, task)
                        assign(dst, task)
                        keep_balancing = True

    def _assign_standbys_default(self) -> None:
        queue = _LoadQueue(self.assigned_load)
        queue.offer_all(range(self.n))
        for task in range(self.n_stateful):
            self._place_standbys(queue, task, self.config.num_standby_replicas)

    def _place_standbys(self, queue: _LoadQueue, task: int, count: int) -> int:
        while count > 0:
            client = queue.poll(lambda c: not self.holds(c, task))
            if client is None:
                break  # Kafka warns: not enough clients for the requested standbys
            self.add_standby(client, task)
            count -= 1
            queue.offer(client)
        return count

    def _same_tags(self, src: int, dst: int) -> bool:
        dst_tags = self.clients[dst].tags
        return all(dst_tags.get(k) == v for k, v in self.clients[src].tags.items())

    def _assign_standbys_tag_aware(self) -> None:
        """KIP-708: each standby on a client that shares no *used* tag value with the copies so far."""
        rack_tags = set(self.config.rack_aware_assignment_tags)
        values_of_key: dict[str, set[str]] = {}
        for c in self.clients:
            for k, v in c.tags.items():
                values_of_key.setdefault(k, set()).add(v)
        owner = {t: c for c in range(self.n) for t in self.active[c]}
        queue = _LoadQueue(self.assigned_load)
        pending: dict[int, int] = {}
        for task in range(self.n_stateful):
            queue.offer_all(range(self.n))
            used_entries: set[tuple[str, str]] = set()
            used_clients = 1  # the active's client counts as used
            remaining = self.config.num_standby_replicas
            last = owner[task]
            while True:
                for k, v in self.clients[last].tags.items():
                    if k not in rack_tags:
                        continue
                    values = values_of_key[k]
                    if len(values) <= used_clients:
                        # Every value of this key is taken: it cannot constrain the next standby.
                        used_entries.difference_update((k, x) for x in values)
                    else:
                        used_entries.add((k, v))

                def on_unused_values(c: int) -> bool:
                    if self.holds(c, task):
                        return False
                    return not any((k, v) in used_entries for k, v in self.clients[c].tags.items())

                client = queue.poll(on_unused_values)
                if client is None:
                    break
                self.add_standby(client, task)
                used_clients += 1
                remaining -= 1
                last = client
                if remaining <= 0:
                    break
            if remaining > 0:
                pending[task] = remaining
        if pending:
            queue.offer_all(range(self.n))
            for task in self._pending_standbys_walk(pending):
                self._place_standbys(queue, task, pending[task])

    def _pending_standbys_walk(self, pending: dict[int, int]) -> list[int]:
        """Kafka keeps the standbys still owed per task in a ``HashMap<TaskId, Integer>`` filled with
        every stateful task in ``TaskId`` order (``Collectors.toMap``), removes each task whose
        standbys all found distinct tag values, and hands the rest out in that map's walk."""
        names = self.stateful
        placed = [names[t] for t in range(self.n_stateful) if t not in pending]
        walk = hash_order_after_removals(names, placed, _task_hash, task_sort_key)
        index = {name: t for t, name in enumerate(names)}
        return [index[name] for name in walk]

    def _most_caught_up_before(self, task: int, destination: int, constraint=None) -> int | None:
        for c in self.clients_by_lag(task):
            if c == destination:
                return None
            if constraint is None or constraint(c):
                return c
        return None

    def _take_warmup_budget(self) -> bool:
        # Kafka decrements on every attempt (getAndDecrement), so the budget may go negative.
        had = self.budget > 0
        self.budget -= 1
        return had

    def _swap(self, task: int, standby_holder: int, active_holder: int) -> None:
        self.remove_standby(standby_holder, task)
        self.add_active(standby_holder, task)
        self.remove_active(active_holder, task)
        self.add_standby(active_holder, task)

    def _move_active_and_try_to_warm_up(self, task: int, source: int, destination: int) -> None:
        self.add_active(source, task)
        self.remove_active(destination, task)
        if self._take_warmup_budget():
            self.add_standby(destination, task)
            self.warmups[destination].add(task)

    def _schedule(self, kind: list[set[int]], skip_warmups: bool) -> list[tuple[int, int, int, int]]:
        movements: list[tuple[int, int, int, int]] = []
        for client in range(self.n):
            for task in sorted(kind[client]):
                if skip_warmups and task in self.warmups[client]:
                    continue
                if self.needs_to_move(client, task):
                    movements.append((len(self.caught_up_clients(task)), task, len(movements), client))
        # The queue's contents are fixed before the first poll, and its order only depends on them.
        return java_priority_queue_order(movements, key=lambda m: (m[0], m[1]))

    def _movement_queue(self) -> ConstrainedPrioritySet:
        """The movement phases' ``ConstrainedPrioritySet`` of clients by assigned load, every client
        offered in ``ProcessId`` order. Loads are read live: see :mod:`.java_queue` for why a
        client is not always the least loaded when the queue yields it. Built only when there is a
        movement: the queue is never polled otherwise."""
        self.load = [n / c for n, c in zip(self.n_assigned, self.cap)]
        return ConstrainedPrioritySet(self.load, self.client_hash, range(self.n))

    def _offer_back(self, queue: ConstrainedPrioritySet, source: int, destination: int) -> None:
        """``offerAll(source, destination)`` after a movement: the two clients whose loads it changed."""
        load, n_assigned, cap = self.load, self.n_assigned, self.cap
        load[source] = n_assigned[source] / cap[source]
        load[destination] = n_assigned[destination] / cap[destination]
        queue.offer_all((source, destination))

    def _active_task_movements(self) -> int:
        movements = self._schedule(self.active, skip_warmups=False)
        if not movements:
            return 0
        queue = self._movement_queue()
        for _, task, _, destination in movements:
            caught_up_list = self.caught_up_clients(task)
            caught_up = set(caught_up_list)
            standby = self.standby
            # A caught-up client with a standby swaps; else any caught-up client takes the active
            # (the destination may keep a warm-up); else the most caught-up client does.
            source = queue.poll(lambda c: c in caught_up and task in standby[c], caught_up_list)
            if source is not None:
                self._swap(task, source, destination)
            else:
                source = queue.poll(caught_up.__contains__, caught_up_list)
                if source is not None:
                    self._move_active_and_try_to_warm_up(task, source, destination)
                else:
                    source = self._most_caught_up_before(task, destination)
                    if source is None:
                        raise AssignmentError(
                            f"task {self.task_names[task]} on client {self.clients[destination].process_id!r} "
                            "was scheduled to move to a more caught-up client, but none exists"
                        )
                    if task in standby[source]:
                        self._swap(task, source, destination)
                    else:
                        self._move_active_and_try_to_warm_up(task, source, destination)
            self._offer_back(queue, source, destination)
        return len(movements)

    def _standby_task_movements(self) -> int:
        movements = self._schedule(self.standby, skip_warmups=True)
        if not movements:
            return 0
        queue = self._movement_queue()
        moved = 0
        for _, task, _, destination in movements:
            caught_up_list = self.caught_up_clients(task)
            caught_up = set(caught_up_list)
            eligible = lambda c, task=task: not self.holds(c, task)  # noqa: E731
            source = queue.poll(lambda c: c in caught_up and eligible(c), caught_up_list)
            if source is None:
                source = self._most_caught_up_before(task, destination, eligible)
            if source is None:
                continue  # every better-placed client already has a copy
            self.add_standby(source, task)
            if self._take_warmup_budget():
                self.warmups[destination].add(task)  # the old copy stays only to keep warming up
            else:
                self.remove_standby(destination, task)
            self._offer_back(queue, source, destination)
            moved += 1
        return moved

    def _assign_stateless(self) -> None:
        queue = _LoadQueue(self.active_load)
        queue.offer_all(range(self.n))
        for task in range(self.n_stateful, len(self.task_names)):
            client = queue.poll()
            self.add_active(client, task)
            queue.offer(client)

    # --- lags unknown -----------------------------------------------------------------------------

    def _fallback_prior_assignment(self) -> StreamsAssignment:
        """``FallbackPriorTaskAssignor`` (see :mod:`.fallback`), which always asks for a probing rebalance."""
        prev_active: list[list[str]] = []
        prev_standby: list[list[str]] = []
        for client in self.clients:
            if client.task_lags is None:
                # initializePrevTasks: -2 was active, any other reported offset sum is a standby.
                reported = client.task_offset_sums
                prev_active.append([t for t, v in reported.items() if v == LATEST_OFFSET])
                prev_standby.append([t for t, v in reported.items() if v != LATEST_OFFSET])
            else:
                # Kafka's lag-taking ClientState constructor: -2 was active, a lag >= 0 a standby.
                prev_active.append([t for t, v in client.task_lags.items() if v == LATEST_OFFSET])
                prev_standby.append([t for t, v in client.task_lags.items() if v >= 0])
        active, standby = fallback_prior_assignment(
            [c.process_id for c in self.clients], self.spec_order, self.cap, prev_active, prev_standby,
            self.stateful, self.stateless, self.config.num_standby_replicas,
        )
        index = {name: t for t, name in enumerate(self.task_names)}
        for c in range(self.n):
            for name in active[c]:
                self.add_active(c, index[name])
            for name in standby[c]:
                self.add_standby(c, index[name])
        return self._result(True, fallback=True)

    def _result(self, probing: bool, fallback: bool) -> StreamsAssignment:
        names = self.task_names
        by_id = {}
        for i, client in enumerate(self.clients):
            warm = self.warmups[i] & self.standby[i]
            by_id[client.process_id] = StreamsClientAssignment(
                client.process_id,
                # Stateless task indices follow the stateful ones: sort by TaskId, not by index.
                active_tasks=tuple(sorted((names[t] for t in self.active[i]), key=task_sort_key)),
                standby_tasks=tuple(names[t] for t in sorted(self.standby[i] - warm)),
                warmup_tasks=tuple(names[t] for t in sorted(warm)),
            )
        return StreamsAssignment(
            clients={c.process_id: by_id[c.process_id] for c in self.spec.clients},
            probing_rebalance_needed=probing,
            probing_rebalance_at_ms=(
                self.spec.now_ms + self.config.probing_rebalance_interval_ms if probing else None
            ),
            fallback_used=fallback,
        )


def _task_hash(task: str) -> int:
    return task_id_hash(*task_sort_key(task))


def assign_streams_ha(spec: StreamsGroupSpec) -> StreamsAssignment:
    """Assign active, standby and warm-up tasks to Kafka Streams clients (``HighAvailabilityTaskAssignor``)."""
    spec.validate()
    return _HighAvailabilityRound(spec).run()
