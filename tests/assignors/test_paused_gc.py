"""``paused_gc``: the collector is off inside, back as it was outside, whatever happens inside."""

from __future__ import annotations

import gc

import pytest

from assignors._common import paused_gc


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_off_inside_and_on_again_after(collector_on):
    with paused_gc():
        assert not gc.isenabled()
        kept = [[i] for i in range(1000)]  # new objects: handed to the oldest generation on the way out
    assert gc.isenabled()
    assert len(kept) == 1000 and gc.get_freeze_count() == 0


def test_on_again_after_an_exception(collector_on):
    with pytest.raises(KeyError):
        with paused_gc():
            raise KeyError("x")
    assert gc.isenabled()


def test_left_off_when_it_was_off(collector_on):
    gc.disable()
    with paused_gc():
        pass
    assert not gc.isenabled()


def test_objects_the_process_froze_stay_frozen(collector_on):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with paused_gc():
            pass
        assert gc.get_freeze_count() == frozen and gc.isenabled()
    finally:
        gc.unfreeze()
