# The two commands of the README, and a few for developers.
.PHONY: setup demo test test-fast clean-state

setup:
	./scripts/bootstrap

# Set up (first run only) and run the monitor end to end on the embedded broker.
demo: setup
	.venv/bin/rebalance-monitor demo

# Set up (first run only) and run the whole test suite: pure tests and the real Kafka/Spark/Delta ones.
test: setup
	.venv/bin/python -m pytest -q --durations=30

# Only the tests that need no broker, no Spark and no JVM (about a minute); a test that starts one
# without the integration marker fails (tests/conftest.py).
test-fast: setup
	.venv/bin/python -m pytest -q -m "not integration"

clean-state:
	-.venv/bin/rebalance-monitor kafka stop
	rm -rf .state data checkpoints/job checkpoints/job.lock checkpoints/job-alert-outbox
