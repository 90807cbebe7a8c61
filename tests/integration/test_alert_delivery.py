"""Alert delivery against a real webhook receiver on loopback (http.server in a thread).

The receiver records every request it acknowledged with 2xx; scripted answers make it fail, refuse,
hang or be absent. Waits are bounded polls on what was received, never timed assertions.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from streaming.alerting.delivery import (AlertDispatcher, InvalidAlertError, OutboxError, WebhookConfig,
                                      WebhookConfigError, label_set_fingerprint, webhook_message)
from streaming.alerting.delivery.dispatcher import take_post
from streaming.alerting.delivery.payload import AlertTransition
from streaming.alerting.delivery.webhook_client import Backoff, _retry_after_s
from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]
FIRED_AT = 1_795_000_000_123  # 2026-11-18T11:06:40.123Z
RESOLVED_AT = 1_795_000_090_000


class Receiver:
    """A webhook receiver on 127.0.0.1 that answers from a script (then 200) and records what it acknowledged.

    ``hang()`` makes every new request wait until ``recover()``; a request that hung is then dropped
    without an answer (the sender has timed out on it long before).
    """

    def __init__(self, port: int = 0, answers: list[int] | None = None):
        self.answers = collections.deque(answers or [])
        self.acknowledged: list[dict] = []  # bodies of requests answered 2xx
        self.headers: list[dict] = []
        self.requests = 0
        self.hanging_now = 0
        self._hang = False
        self._released = threading.Event()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.requests += 1
                    hang = receiver._hang
                    if hang:
                        receiver.hanging_now += 1
                    status = receiver.answers.popleft() if receiver.answers and not hang else 200
                if hang:
                    receiver._released.wait()
                    self.close_connection = True
                    return
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                if 200 <= status < 300:
                    with receiver._lock:
                        receiver.acknowledged.append(json.loads(body))
                        receiver.headers.append(dict(self.headers))

            def log_message(self, *args):  # keep the test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hooks/alerts?token=t0p-s3cret"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def hang(self) -> None:
        with self._lock:
            self._hang = True

    def recover(self) -> None:
        with self._lock:
            self._hang = False
        self._released.set()

    def stop(self) -> None:
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def alerts(self) -> list[dict]:
        with self._lock:
            return [a for body in self.acknowledged for a in body["alerts"]]

    def transitions(self) -> collections.Counter:
        """How many times each transition (fingerprint, status, startsAt) was acknowledged."""
        return collections.Counter((a["fingerprint"], a["status"], a["startsAt"]) for a in self.alerts())


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.stop()


def row(alert_id: str = "a1", *, status: str = "firing", group_id: str = "orders", subject: str | None = "m-1",
        rule: str = "member_flapping", fired_at: int = FIRED_AT, severity: str = "warning") -> dict:
    return {"alert_id": alert_id, "rule": rule, "group_id": group_id, "subject": subject, "severity": severity,
            "status": status, "value": 7.0, "threshold": 5.0, "fired_at": fired_at,
            "resolved_at": RESOLVED_AT if status == "resolved" else None, "generation": 42,
            "summary": f"{subject} of {group_id} flapped", "description": "joined and left 7 times in 10 minutes"}


def config(url: str, **overrides) -> WebhookConfig:
    # Short back-off so retries happen quickly; a generous request timeout so a loaded machine never
    # turns a slow 200 into a resend (except where a test wants timeouts).
    settings = {"url": url, "timeout_ms": 10_000, "backoff_initial_ms": 20, "backoff_max_ms": 200,
                "static_labels": {"env": "test"}, "headers": {"Authorization": "Bearer hunter2"}}
    return WebhookConfig.from_mapping({**settings, **overrides})


def wait_until(condition, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"not reached within {timeout_s} s: {what}")


def key(r: dict) -> tuple[str, str, str]:
    """(fingerprint, status, startsAt) the receiver should see for a submitted row."""
    message = webhook_message(r["group_id"], [AlertTransition.from_row(r)], receiver="x",
                              static_labels={"env": "test"})
    alert = message["alerts"][0]
    return alert["fingerprint"], alert["status"], alert["startsAt"]


# ------------------------------------------------------------------------------------------ format


def test_fingerprint_is_prometheus_label_set_fingerprint():
    # The values of prometheus/common's TestLabelsToSignature.
    assert label_set_fingerprint({}) == f"{14695981039346656037:016x}"
    assert label_set_fingerprint({"name": "garland, briggs", "fear": "love is not enough"}) == \
        f"{5799056148416392346:016x}"


def test_message_is_alertmanager_webhook_format():
    firing = AlertTransition.from_row(row("a1"))
    resolved = AlertTransition.from_row(row("a1", status="resolved"))
    other = AlertTransition.from_row(row("a2", subject="m-2", severity="critical"))
    message = webhook_message("orders", [firing, other], receiver="ops", static_labels={"env": "prod"},
                              external_url="http://monitor:8080")

    assert set(message) == {"version", "groupKey", "truncatedAlerts", "status", "receiver", "groupLabels",
                            "commonLabels", "commonAnnotations", "externalURL", "alerts"}
    assert message["version"] == "4"
    assert message["groupKey"] == '{}:{group_id="orders"}'
    assert message["status"] == "firing" and message["truncatedAlerts"] == 0
    assert message["groupLabels"] == {"group_id": "orders"}
    assert message["commonLabels"] == {"alertname": "member_flapping", "env": "prod", "group_id": "orders"}
    assert message["commonAnnotations"] == {"description": "joined and left 7 times in 10 minutes",
                                            "generation": "42", "threshold": "5", "value": "7"}
    first = message["alerts"][0]
    assert set(first) == {"status", "labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint"}
    assert first["labels"] == {"alertname": "member_flapping", "env": "prod", "group_id": "orders",
                               "severity": "warning", "subject": "m-1"}
    assert first["startsAt"] == "2026-11-18T11:06:40.123Z"
    assert first["endsAt"] == "0001-01-01T00:00:00Z"
    assert first["fingerprint"] == label_set_fingerprint(first["labels"])
    assert len(first["fingerprint"]) == 16 and message["alerts"][1]["fingerprint"] != first["fingerprint"]

    ended = webhook_message("orders", [resolved], receiver="ops", static_labels={"env": "prod"})["alerts"][0]
    assert ended["status"] == "resolved"
    assert ended["fingerprint"] == first["fingerprint"]
    assert ended["startsAt"] == first["startsAt"] and ended["endsAt"] == "2026-11-18T11:08:10Z"


def test_an_alert_without_subject_has_no_subject_label():
    alert = webhook_message("orders", [AlertTransition.from_row(row(subject=None, rule="rebalance_storm"))],
                            receiver="r", static_labels={})["alerts"][0]
    assert alert["labels"] == {"alertname": "rebalance_storm", "group_id": "orders", "severity": "warning"}


@pytest.mark.parametrize("settings, message", [
    ({}, "alerts.webhook.url: missing"),
    ({"url": "ftp://host/x"}, "alerts.webhook.url: expected an http:// or https:// URL"),
    ({"url": "http://h", "timeout": 5}, "alerts.webhook.timeout: unknown key"),
    ({"url": "http://h", "timeout_ms": "5s"}, "alerts.webhook.timeout_ms: expected an integer"),
    ({"url": "http://h", "max_batch": 0}, "alerts.webhook.max_batch: expected a positive integer"),
    ({"url": "http://h", "backoff_initial_ms": 900, "backoff_max_ms": 100},
     "alerts.webhook.backoff_initial_ms: 900 is above backoff_max_ms"),
    ({"url": "http://h", "static_labels": {"severity": "x"}}, "alerts.webhook.static_labels.severity: reserved"),
    ({"url": "http://h", "static_labels": {"bad-name": "x"}}, "alerts.webhook.static_labels.bad-name: not a valid"),
    ({"url": "http://h", "headers": {"X-Token": 5}}, "alerts.webhook.headers.X-Token: expected a string"),
    ({"url": "http://h", "headers": {"Content-Type": "text/plain"}}, "alerts.webhook.headers.Content-Type"),
])
def test_bad_config_is_an_error_naming_the_key(settings, message):
    with pytest.raises(WebhookConfigError, match="^" + message.replace("(", r"\(")):
        WebhookConfig.from_mapping(settings)


def test_config_repr_hides_header_values_and_url_path():
    text = repr(config("http://127.0.0.1:1/hooks?token=t0p-s3cret"))
    assert "hunter2" not in text and "t0p-s3cret" not in text and "'Authorization': '***'" in text


@pytest.mark.parametrize("change, message", [
    ({"fired_at": None}, "field 'fired_at' must be an integer"),
    ({"severity": "page"}, "severity 'page' is not one of"),
    ({"status": "resolved", "resolved_at": None}, "a resolved transition needs resolved_at"),
    ({"value": "high"}, "field 'value' must be a number"),
])
def test_bad_alert_row_is_an_error_naming_the_field(tmp_path, change, message):
    with pytest.raises(InvalidAlertError, match=message):
        AlertTransition.from_row({**row(), **change})
    missing = row()
    del missing["group_id"]
    with pytest.raises(InvalidAlertError, match="missing field 'group_id'"):
        AlertTransition.from_row(missing)


# ------------------------------------------------------------------------------------------ delivery


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_firing_then_resolved_are_delivered_with_the_same_fingerprint(receiver, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    with AlertDispatcher(config(receiver.url), tmp_path) as dispatcher:
        assert dispatcher.submit([row("a1")]) == 1
        wait_until(lambda: len(receiver.alerts()) == 1, "the firing alert arrives")
        assert dispatcher.submit([row("a1", status="resolved")]) == 1
        wait_until(lambda: len(receiver.alerts()) == 2, "the resolved alert arrives")
        assert dispatcher.stats().delivered == 2 and dispatcher.stats().pending == 0

    fired, resolved = receiver.alerts()
    assert fired["status"] == "firing" and resolved["status"] == "resolved"
    assert fired["fingerprint"] == resolved["fingerprint"]
    assert fired["startsAt"] == resolved["startsAt"] == "2026-11-18T11:06:40.123Z"
    assert fired["endsAt"] == "0001-01-01T00:00:00Z" and resolved["endsAt"] == "2026-11-18T11:08:10Z"
    assert fired["labels"]["env"] == "test"
    assert receiver.acknowledged[1]["status"] == "resolved"
    assert all(h["Authorization"] == "Bearer hunter2" and h["Content-Type"] == "application/json"
               for h in receiver.headers)
    assert "hunter2" not in caplog.text and "t0p-s3cret" not in caplog.text


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_alerts_pending_together_go_in_one_post_per_group(receiver, tmp_path):
    rows = [row(f"a{i}", subject=f"m-{i}") for i in range(5)] + \
           [row(f"b{i}", group_id="payments", subject=f"m-{i}") for i in range(3)]
    with AlertDispatcher(config(receiver.url), tmp_path) as dispatcher:
        dispatcher.submit(rows)
        assert dispatcher.wait_until_delivered(60)
    assert sorted(len(body["alerts"]) for body in receiver.acknowledged) == [3, 5]
    assert {body["groupLabels"]["group_id"] for body in receiver.acknowledged} == {"orders", "payments"}


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_server_errors_are_retried_and_the_alert_delivered_once(tmp_path):
    receiver = Receiver(answers=[500, 503, 500])
    try:
        with AlertDispatcher(config(receiver.url), tmp_path) as dispatcher:
            dispatcher.submit([row("a1")])
            assert dispatcher.wait_until_delivered(60)
            stats = dispatcher.stats()
        assert receiver.requests == 4
        assert stats.failed_attempts == 3 and stats.delivered == 1 and stats.rejected == 0
        assert receiver.transitions() == {key(row("a1")): 1}
    finally:
        receiver.stop()


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_receiver_that_is_down_gets_the_alerts_once_it_starts(tmp_path):
    port = free_port()  # nothing listens there yet: connections are refused
    url = f"http://127.0.0.1:{port}/hooks"
    with AlertDispatcher(config(url), tmp_path) as dispatcher:
        dispatcher.submit([row("a1"), row("a2", subject="m-2")])
        wait_until(lambda: dispatcher.stats().failed_attempts >= 3, "the sender keeps retrying")
        assert dispatcher.stats().pending == 2
        receiver = Receiver(port=port)
        try:
            assert dispatcher.wait_until_delivered(60)
            assert receiver.transitions() == {key(row("a1")): 1, key(row("a2", subject="m-2")): 1}
        finally:
            receiver.stop()


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_a_hanging_receiver_never_blocks_submit(receiver, tmp_path):
    # A small queue, so most rows take the on-disk path while the receiver hangs.
    settings = config(receiver.url, timeout_ms=300, queue_capacity=8, max_batch=5)
    rows = [row(f"a{i}", group_id=f"g{i % 7}", subject=f"m-{i}") for i in range(300)]
    receiver.hang()
    with AlertDispatcher(settings, tmp_path) as dispatcher:
        dispatcher.submit(rows[:1])
        wait_until(lambda: receiver.hanging_now >= 1, "the sender is stuck in a hanging request")

        submitted_while_blocked = []

        def stream():
            for r in rows[1:]:
                dispatcher.submit([r])
                submitted_while_blocked.append(receiver.hanging_now >= 1 and not receiver.acknowledged)

        stream_thread = threading.Thread(target=stream)
        stream_thread.start()
        stream_thread.join(120)
        assert not stream_thread.is_alive(), "submit blocked on the hanging receiver"
        assert len(submitted_while_blocked) == 299 and all(submitted_while_blocked)
        assert dispatcher.stats().pending == 300 and dispatcher.stats().queued <= 8
        wait_until(lambda: dispatcher.stats().failed_attempts >= 1, "the hanging request times out")

        receiver.recover()
        assert dispatcher.wait_until_delivered(120)
        assert dispatcher.stats().delivered == 300
    # A request answered just as it timed out may be resent (at-least-once), but none is missing.
    assert set(receiver.transitions()) == {key(r) for r in rows}


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_restarted_dispatcher_delivers_the_rest_and_nothing_twice(tmp_path):
    receiver = Receiver(answers=[200] + [503] * 10_000)
    first = [row("a1"), row("a2", subject="m-2")]
    rest = [row("a1", status="resolved"), row("a3", subject="m-3")]
    try:
        a = AlertDispatcher(config(receiver.url), tmp_path)
        a.submit(first)
        wait_until(lambda: a.stats().delivered == 2, "the first POST is acknowledged")
        a.submit(rest)
        wait_until(lambda: a.stats().failed_attempts >= 2, "the rest is being retried")
        assert a.stats().sender_running
        assert a.close(30)
        assert a.stats().pending == 2 and not a.stats().sender_running

        receiver.answers.clear()  # healthy again
        with AlertDispatcher(config(receiver.url), tmp_path) as b:
            assert b.stats().pending == 2  # read from the outbox at start
            assert b.wait_until_delivered(60)
            assert b.stats().delivered == 2
            assert b.submit(first + rest) == 0  # a replay of everything is ignored
        assert receiver.transitions() == {key(r): 1 for r in first + rest}
        fingerprints = {a["status"]: a["fingerprint"] for a in receiver.alerts()
                        if a["labels"]["subject"] == "m-1"}
        assert fingerprints["firing"] == fingerprints["resolved"]
    finally:
        receiver.stop()


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_alerts_submitted_before_a_crash_are_sent_by_the_next_run(tmp_path, receiver):
    # The first run's receiver is absent; the process is killed right after submit returned.
    dead_url = f"http://127.0.0.1:{free_port()}/hooks"
    rows = [row(f"a{i}", subject=f"m-{i}") for i in range(20)]
    script = (
        "import json, sys, time\n"
        "from streaming.alerting.delivery import AlertDispatcher, WebhookConfig\n"
        f"d = AlertDispatcher(WebhookConfig(url={dead_url!r}, backoff_initial_ms=50), {str(tmp_path)!r})\n"
        "d.submit(json.loads(sys.stdin.readline()))\n"
        "print('submitted', flush=True)\n"
        "time.sleep(600)\n")
    child = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        child.stdin.write(json.dumps(rows) + "\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "submitted"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)

    with AlertDispatcher(config(receiver.url), tmp_path) as dispatcher:
        assert dispatcher.wait_until_delivered(60)
    assert receiver.transitions() == {key(r): 1 for r in rows}


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_replayed_transition_is_delivered_once(receiver, tmp_path):
    rows = [row("a1"), row("a2", subject="m-2")]
    with AlertDispatcher(config(receiver.url), tmp_path) as dispatcher:
        assert dispatcher.submit(rows) == 2
        assert dispatcher.submit(rows + [row("a1")]) == 0  # Spark replays the micro-batch
        assert dispatcher.wait_until_delivered(60)
        assert dispatcher.submit(rows) == 0  # and again after delivery
        assert dispatcher.wait_until_delivered(60)
        assert dispatcher.stats().duplicates_ignored == 5 and dispatcher.stats().delivered == 2
    assert receiver.transitions() == {key(r): 1 for r in rows}


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_refused_post_is_set_aside_and_resent_at_the_next_start(tmp_path):
    receiver = Receiver(answers=[401])
    try:
        with AlertDispatcher(config(receiver.url), tmp_path) as dispatcher:
            dispatcher.submit([row("a1")])
            wait_until(lambda: dispatcher.stats().rejected == 1, "the 401 sets the alert aside")
            dispatcher.submit([row("a2", subject="m-2")])  # later alerts still flow
            assert dispatcher.wait_until_delivered(60)
            assert dispatcher.stats().failed_attempts == 1  # a 401 is not retried in this run
        assert receiver.transitions() == {key(row("a2", subject="m-2")): 1}

        with AlertDispatcher(config(receiver.url), tmp_path) as restarted:
            assert restarted.wait_until_delivered(60)
        assert receiver.transitions() == {key(row("a1")): 1, key(row("a2", subject="m-2")): 1}
    finally:
        receiver.stop()


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_refused_firing_whose_resolution_got_through_is_not_resent(tmp_path):
    receiver = Receiver(answers=[400])
    try:
        with AlertDispatcher(config(receiver.url), tmp_path) as dispatcher:
            dispatcher.submit([row("a1")])
            wait_until(lambda: dispatcher.stats().rejected == 1, "the 400 sets the firing aside")
            dispatcher.submit([row("a1", status="resolved"), row("a2", subject="m-2")])
            assert dispatcher.wait_until_delivered(60)
        with AlertDispatcher(config(receiver.url), tmp_path) as restarted:
            assert restarted.stats().pending == 0
            # A new transition after the restart proves the sender ran past whatever it read back.
            restarted.submit([row("a3", subject="m-3")])
            assert restarted.wait_until_delivered(60)
        assert receiver.transitions() == {key(row("a1", status="resolved")): 1, key(row("a2", subject="m-2")): 1,
                                          key(row("a3", subject="m-3")): 1}
    finally:
        receiver.stop()


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_a_bad_row_is_refused_before_anything_is_stored(receiver, tmp_path):
    with AlertDispatcher(config(receiver.url), tmp_path) as dispatcher:
        with pytest.raises(InvalidAlertError, match="alert row 'a2': missing field 'status'"):
            dispatcher.submit([row("a1"), {k: v for k, v in row("a2").items() if k != "status"}])
        assert dispatcher.stats().submitted == 0 and dispatcher.stats().pending == 0


def test_backoff_doubles_with_jitter_and_honours_retry_after_up_to_the_ceiling():
    fixed_half = Backoff(0.5, 8.0, rng=lambda: 0.0)
    assert [fixed_half.delay(n) for n in (1, 2, 3, 4, 5, 6, 50)] == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    full = Backoff(0.5, 8.0, rng=lambda: 1.0)
    assert [full.delay(n) for n in (1, 2, 5, 6)] == [0.5, 1.0, 8.0, 8.0]
    assert fixed_half.delay(1, retry_after_s=3.0) == 3.0
    assert fixed_half.delay(1, retry_after_s=3600.0) == 8.0


def test_retry_after_is_read_as_seconds_or_an_http_date():
    assert _retry_after_s("120") == 120.0
    assert _retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: retry now
    assert _retry_after_s("soon") is None and _retry_after_s(None) is None


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_a_second_dispatcher_on_the_same_outbox_is_refused(receiver, tmp_path):
    with AlertDispatcher(config(receiver.url), tmp_path):
        with pytest.raises(OutboxError, match="another dispatcher .* is using it"):
            AlertDispatcher(config(receiver.url), tmp_path)
    with AlertDispatcher(config(receiver.url), tmp_path) as after_close:
        assert after_close.stats().pending == 0


def test_a_post_takes_the_head_group_in_order_and_splits_an_alert_and_its_resolution():
    items = [(seq, AlertTransition.from_row(r)) for seq, r in enumerate([
        row("a1", group_id="orders"), row("p1", group_id="payments"), row("a2", group_id="orders", subject="m-2"),
        row("a1", group_id="orders", status="resolved"), row("a3", group_id="orders", subject="m-3"),
        row("p2", group_id="payments", subject="m-2")], start=1)]
    queue = collections.deque(items)

    def seqs(post):
        return [seq for seq, _ in post]

    assert seqs(take_post(queue, max_batch=50)) == [1, 3]  # a1's resolution waits for the next POST
    assert seqs(take_post(queue, max_batch=50)) == [2, 6]
    assert seqs(take_post(queue, max_batch=50)) == [4, 5]
    assert not queue
    queue.extend(items)
    assert seqs(take_post(queue, max_batch=1)) == [1] and seqs(queue) == [2, 3, 4, 5, 6]
