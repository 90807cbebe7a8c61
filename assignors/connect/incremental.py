"""Kafka Connect's ``IncrementalCooperativeAssignor`` (KIP-415, KAFKA-12495) as a pure state machine.

Protocols "compatible" (V1) and "sessioned" (V2) share this algorithm (spec 5.2). In Kafka the
leader's assignor instance remembers a few things between rebalances; here that memory is the
immutable :class:`~assignors.connect.model.ConnectAssignorState` passed in and handed back, and the
clock is the ``now_ms`` argument, so one call is a pure function of (spec, state, now).

One round, in Kafka's order:

1. Forget the previous assignment if this leader did not complete the last generation.
2. Derive sets: configured, active (what workers report), deleted = previous - configured,
   duplicated (reported by more than one worker), lost = previous - active - deleted,
   created = configured - previous - active. If last round's revocations were not honoured
   (revoked items still reported), the previous assignment is reset to what is active.
3. Revoke deleted items from their workers and duplicated items from *every* holder.
4. Lost work: reassign at once when no worker left (a worker merely missed an assignment) or
   when ``scheduled.rebalance.max.delay.ms`` is 0; otherwise hold it back for the delay, noting
   workers seen empty meanwhile as candidates, and when the delay expires give it round-robin to
   those candidates (a bounced worker gets its own work back) or, without candidates, treat it as new.
5. Load-balancing revocations only when no delay is running; two revoking rounds in a row are
   separated by an exponential back-off (40 ms, 1.6 s, 64 s, then capped at the max delay;
   never with max delay 0).
6. Assign created and reassigned-lost items, connectors then tasks, by water-filling the least
   loaded workers (ties by worker id).

Deviation, documented: Kafka revokes deleted/duplicated items in ``HashSet`` order; we list them in
``ConnectorTaskId`` order (the *set* revoked is the same, only the order inside the message differs).
The back-off uses Java's formula with Python floats (same IEEE doubles; ``log``/``pow`` may differ by
an ulp, which cannot change the integer milliseconds except at an exact boundary).
"""

from __future__ import annotations

import math
from typing import Iterable, TypeVar

from ..java_order import hashmap_order
from .eager import config_mismatch
from .model import (
    ConnectAssignment,
    ConnectAssignorState,
    ConnectGroupSpec,
    ConnectorTaskId,
    ConnectWorkerAssignment,
    java_string_key,
    task_key,
)

T = TypeVar("T")

#: KAFKA-12495: ``ExponentialBackoff(initial=1, multiplier=40, max=maxDelay, jitter=0)``.
_BACKOFF_MULTIPLIER = 40


def revoking_backoff_ms(attempts: int, max_delay_ms: int) -> int:
    """Delay before the ``attempts``-th successive revoking rebalance (Java ``ExponentialBackoff``)."""
    initial = 0 if max_delay_ms == 0 else 1
    if max_delay_ms > initial:
        exp_max = math.log(max_delay_ms / max(initial, 1)) / math.log(_BACKOFF_MULTIPLIER)
    else:
        exp_max = 0.0
    if exp_max == 0:
        return initial
    term = initial * math.pow(_BACKOFF_MULTIPLIER, min(attempts, exp_max))
    value = int(term)
    return max_delay_ms if value > max_delay_ms else value


def _dedupe(items: Iterable[T]) -> list[T]:
    # Kafka builds ConnectorsAndTasks from LinkedHashSets: a repeated item counts once, first place wins.
    return list(dict.fromkeys(items))


class _Load:
    """A worker's next assignment while the round is computed (Kafka's ``WorkerLoad``)."""

    __slots__ = ("worker", "connectors", "tasks")

    def __init__(self, worker: str, connectors: list[str], tasks: list[ConnectorTaskId]):
        self.worker = worker
        self.connectors = connectors
        self.tasks = tasks

    def is_empty(self) -> bool:
        return not self.connectors and not self.tasks


def _water_fill(loads: list[_Load], items: list[T], attr: str) -> None:
    """Kafka's ``assignConnectors``/``assignTasks``: fill the least-loaded prefix one item each, repeatedly."""
    if not items:
        return
    loads.sort(key=lambda wl: (len(getattr(wl, attr)), java_string_key(wl.worker)))
    first = getattr(loads[0], attr)
    it = iter(items)
    remaining = len(items)
    while remaining:
        first_load = len(first)
        up_to = next((i for i, wl in enumerate(loads) if len(getattr(wl, attr)) > first_load), len(loads))
        for wl in loads[:up_to]:
            getattr(wl, attr).append(next(it))
            remaining -= 1
            if not remaining:
                break


def _balancing_revocations(total: int, loads: list[_Load], attr: str) -> dict[str, list]:
    """Revoke the first excess items of each worker above its fair share (floor, or floor+1 for the first ``extra``)."""
    workers = len(loads)
    minimum, extra = divmod(total, workers)
    sizes = [len(getattr(wl, attr)) for wl in loads]
    at_min = sum(1 for n in sizes if n == minimum)
    at_extra = sum(1 for n in sizes if n == minimum + 1)
    if at_extra == extra and at_min + at_extra == workers:
        return {}
    result: dict[str, list] = {}
    allocated_extras = 0
    for wl, size in zip(loads, sizes):
        if size <= minimum:
            continue
        if allocated_extras < extra:
            allocated_extras += 1
            if size == minimum + 1:
                continue
            allowed = minimum + 1
        else:
            allowed = minimum
        result[wl.worker] = list(getattr(wl, attr)[: size - allowed])
    return result


def assign_connect_incremental(
    spec: ConnectGroupSpec, state: ConnectAssignorState | None, now_ms: int
) -> tuple[ConnectAssignment, ConnectAssignorState]:
    """One leader-side rebalance of Connect's incremental cooperative protocol.

    Returns the assignment for every worker and the leader state to pass to the next call.
    On ``CONFIG_MISMATCH`` the state is returned unchanged, as Kafka does not touch it.
    """
    spec.validate()
    if state is None:
        state = ConnectAssignorState()
    mismatch = config_mismatch(spec)
    if mismatch is not None:
        return mismatch, state
    return _Round(spec, state, now_ms).run()


class _Round:
    """Single-use: the phases of one ``performTaskAssignment`` call over local copies of the state."""

    def __init__(self, spec: ConnectGroupSpec, state: ConnectAssignorState, now_ms: int):
        self.spec = spec
        self.now = now_ms
        self.max_delay = spec.scheduled_rebalance_max_delay_ms
        self.scheduled = state.scheduled_rebalance_ms
        self.delay = state.delay_ms
        self.candidates: list[str] = list(state.candidate_workers)
        self.revoked_in_previous = state.revoked_in_previous
        self.successive = state.num_successive_revoking_rebalances
        self.previous_members = state.previous_members
        self.state = state

    def run(self) -> tuple[ConnectAssignment, ConnectAssignorState]:
        spec, state = self.spec, self.state
        reported = {
            w.worker_id: (_dedupe(w.connectors), _dedupe(w.tasks)) for w in spec.workers
        }
        # Kafka keeps the members in a HashMap: revocations and candidates follow its order.
        order = hashmap_order([w.worker_id for w in spec.workers])

        if state.previous_generation_id != spec.last_completed_generation_id:
            prev_c: set[str] = set()
            prev_t: set[ConnectorTaskId] = set()
        else:
            prev_c, prev_t = set(state.previous_connectors), set(state.previous_tasks)

        configured_c = set(spec.connectors)
        configured_t = set(spec.configured_tasks())
        active_c = {c for cs, _ in reported.values() for c in cs}
        active_t = {t for _, ts in reported.values() for t in ts}

        if state.previous_revoked_connectors or state.previous_revoked_tasks:
            # Last round's revocations were not honoured: start again from what is running.
            if (state.previous_revoked_connectors & active_c) or (state.previous_revoked_tasks & active_t):
                prev_c, prev_t = set(active_c), set(active_t)

        deleted_c = prev_c - configured_c
        deleted_t = prev_t - configured_t
        dup_c, dup_t = self._duplicated(reported)
        lost_c = sorted(prev_c - active_c - deleted_c, key=java_string_key)
        lost_t = sorted(prev_t - active_t - deleted_t, key=task_key)
        created_c = sorted(configured_c - prev_c - active_c, key=java_string_key)
        created_t = sorted(configured_t - prev_t - active_t, key=task_key)

        current = {
            w: ([c for c in cs if c not in deleted_c], [t for t in ts if t not in deleted_t])
            for w, (cs, ts) in reported.items()
        }
        revoke_c: dict[str, list[str]] = {w: [] for w in reported}
        revoke_t: dict[str, list[ConnectorTaskId]] = {w: [] for w in reported}
        for w, (cs, ts) in reported.items():
            revoke_c[w] += sorted((c for c in cs if c in deleted_c), key=java_string_key)
            revoke_c[w] += sorted((c for c in cs if c in dup_c and c not in deleted_c), key=java_string_key)
            revoke_t[w] += sorted((t for t in ts if t in deleted_t), key=task_key)
            revoke_t[w] += sorted((t for t in ts if t in dup_t and t not in deleted_t), key=task_key)

        loads = []
        for w in order:
            cs, ts = reported[w]
            gone_c, gone_t = set(revoke_c[w]), set(revoke_t[w])
            loads.append(_Load(w, [c for c in cs if c not in gone_c], [t for t in ts if t not in gone_t]))

        reassign_c, reassign_t = self._handle_lost(lost_c, lost_t, loads)

        if self.delay == 0:
            lb_c, lb_t = self._load_balancing(configured_c, configured_t, loads)
            wants_revocation = bool(lb_c or lb_t)
            if self.revoked_in_previous and wants_revocation:
                self.successive += 1
                self.delay = revoking_backoff_ms(self.successive, self.max_delay)
                if self.delay != 0:
                    # Two revoking rounds in a row: wait instead, so workers are not churned.
                    self.scheduled = self.now + self.delay
                else:
                    self._apply_revocations(lb_c, lb_t, revoke_c, revoke_t, loads)
            elif wants_revocation:
                self._apply_revocations(lb_c, lb_t, revoke_c, revoke_t, loads)
                self.revoked_in_previous = True
            elif self.revoked_in_previous:
                # Converged after a revoking round: reset the back-off clock.
                self.revoked_in_previous = False
                self.successive = 0
        else:
            self.revoked_in_previous = False

        _water_fill(loads, created_c + reassign_c, "connectors")
        _water_fill(loads, created_t + reassign_t, "tasks")

        by_worker = {wl.worker: wl for wl in loads}
        workers_out: dict[str, ConnectWorkerAssignment] = {}
        all_revoked_c: set[str] = set()
        all_revoked_t: set[ConnectorTaskId] = set()
        for w in spec.workers:
            wid = w.worker_id
            wl = by_worker[wid]
            cur_c, cur_t = set(current[wid][0]), set(current[wid][1])
            rc, rt = tuple(revoke_c[wid]), tuple(revoke_t[wid])
            set_rc, set_rt = set(rc), set(rt)
            all_revoked_c.update(rc)
            all_revoked_t.update(rt)
            workers_out[wid] = ConnectWorkerAssignment(
                wid,
                connectors=tuple(c for c in wl.connectors if c not in set_rc),
                tasks=tuple(t for t in wl.tasks if t not in set_rt),
                assigned_connectors=tuple(c for c in wl.connectors if c not in cur_c),
                assigned_tasks=tuple(t for t in wl.tasks if t not in cur_t),
                revoked_connectors=rc,
                revoked_tasks=rt,
                delay_ms=self.delay,
            )

        next_prev_c = {c for wl in loads for c in wl.connectors} - all_revoked_c
        next_prev_t = {t for wl in loads for t in wl.tasks} - all_revoked_t
        # Lost work stays in the leader's view until it is reassigned, so it is not "created" next time.
        next_prev_c.update(lost_c)
        next_prev_t.update(lost_t)

        assigned_c = {c for wl in loads for c in wl.connectors}
        assigned_t = {t for wl in loads for t in wl.tasks}
        new_state = ConnectAssignorState(
            previous_connectors=frozenset(next_prev_c),
            previous_tasks=frozenset(next_prev_t),
            previous_revoked_connectors=frozenset(all_revoked_c),
            previous_revoked_tasks=frozenset(all_revoked_t),
            previous_generation_id=spec.generation_id,
            previous_members=frozenset(reported),
            scheduled_rebalance_ms=self.scheduled,
            delay_ms=self.delay,
            candidate_workers=tuple(self.candidates),
            revoked_in_previous=self.revoked_in_previous,
            num_successive_revoking_rebalances=self.successive,
        )
        assignment = ConnectAssignment(
            workers=workers_out,
            leader_id=spec.leader_id,
            config_offset=spec.leader_config_offset,
            delay_ms=self.delay,
            lost_pending_connectors=tuple(c for c in lost_c if c not in assigned_c),
            lost_pending_tasks=tuple(t for t in lost_t if t not in assigned_t),
        )
        return assignment, new_state

    @staticmethod
    def _duplicated(reported) -> tuple[set[str], set[ConnectorTaskId]]:
        seen_c: set[str] = set()
        seen_t: set[ConnectorTaskId] = set()
        dup_c: set[str] = set()
        dup_t: set[ConnectorTaskId] = set()
        for cs, ts in reported.values():
            for c in cs:
                (dup_c if c in seen_c else seen_c).add(c)
            for t in ts:
                (dup_t if t in seen_t else seen_t).add(t)
        return dup_c, dup_t

    def _reset_delay(self) -> None:
        self.candidates = []
        self.scheduled = 0
        self.delay = 0

    def _handle_lost(
        self, lost_c: list[str], lost_t: list[ConnectorTaskId], loads: list[_Load]
    ) -> tuple[list[str], list[ConnectorTaskId]]:
        """Kafka's ``handleLostAssignments``; returns the lost items to assign as if new."""
        if not lost_c and not lost_t and not self.revoked_in_previous:
            self._reset_delay()
            return [], []
        members = {wl.worker for wl in loads}
        if self.scheduled <= 0 and members >= self.previous_members:
            # Nobody left: the owner just missed the last assignment, so hand the work out now.
            return list(lost_c), list(lost_t)
        if self.max_delay == 0:
            return list(lost_c), list(lost_t)

        if 0 < self.scheduled <= self.now:
            by_worker = {wl.worker: wl for wl in loads}
            candidates = [by_worker[w] for w in self.candidates if w in by_worker]
            reassign: tuple[list[str], list[ConnectorTaskId]] = ([], [])
            if candidates:
                # Each resource type restarts at the first candidate, as Kafka's two loops do.
                for i, c in enumerate(lost_c):
                    candidates[i % len(candidates)].connectors.append(c)
                for i, t in enumerate(lost_t):
                    candidates[i % len(candidates)].tasks.append(t)
            else:
                reassign = (list(lost_c), list(lost_t))
            self._reset_delay()
            # The full delay has passed, so a revoking rebalance may follow right away.
            self.revoked_in_previous = False
            return reassign

        # Within the delay (or starting it): remember who is empty now, in Java HashSet order.
        empty_now = hashmap_order([wl.worker for wl in loads if wl.is_empty()])
        for w in empty_now:
            if w not in self.candidates:
                self.candidates.append(w)
        if self.now < self.scheduled:
            remaining = self.scheduled - self.now
            self.delay = min(remaining, self.max_delay) if remaining > 0 else 0
        else:
            self.delay = self.max_delay
        self.scheduled = self.now + self.delay
        return [], []

    def _load_balancing(self, configured_c, configured_t, loads: list[_Load]):
        if all(wl.is_empty() for wl in loads):
            return {}, {}
        if not configured_c and not configured_t:
            return {}, {}
        return (
            _balancing_revocations(len(configured_c), loads, "connectors"),
            _balancing_revocations(len(configured_t), loads, "tasks"),
        )

    @staticmethod
    def _apply_revocations(lb_c, lb_t, revoke_c, revoke_t, loads: list[_Load]) -> None:
        for wl in loads:
            gone_c = lb_c.get(wl.worker, [])
            gone_t = lb_t.get(wl.worker, [])
            if gone_c:
                revoke_c[wl.worker].extend(gone_c)
                drop = set(gone_c)
                wl.connectors = [c for c in wl.connectors if c not in drop]
            if gone_t:
                revoke_t[wl.worker].extend(gone_t)
                drop_t = set(gone_t)
                wl.tasks = [t for t in wl.tasks if t not in drop_t]
