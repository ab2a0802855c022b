"""The deadline heap the stacks keep their timers in gives the answers a scan over every
record gave: the earliest deadline still held, and the owners due in id order."""

from __future__ import annotations

import random

from mpa_emu.stacks.deadlines import Deadlines


def test_earliest_skips_deadlines_no_longer_held() -> None:
    held: dict[int, int | None] = {}
    timers = Deadlines(lambda o, at: held.get(o) == at)
    for owner, at in ((1, 50), (2, 30), (3, 40)):
        held[owner] = timers.arm(owner, at)
    held[2] = None  # cancelled: the heap is not told
    assert timers.earliest() == 40
    held[3] = timers.arm(3, 60)  # moved later
    assert timers.earliest() == 50
    held.clear()
    assert timers.earliest() is None
    assert len(timers) == 0


def test_due_owners_once_each_in_id_order() -> None:
    timers = Deadlines(lambda _o, _at: True)
    for owner, at in ((7, 10), (3, 20), (5, 10), (3, 5), (9, 99)):
        timers.arm(owner, at)
    assert timers.due(20) == [3, 5, 7]
    assert timers.due(20) == []
    assert timers.due(100) == [9]


def test_next_due_earliest_first_ties_by_owner() -> None:
    held = {4: 10, 2: 10, 1: 15}
    timers = Deadlines(lambda o, at: held.get(o) == at)
    for owner, at in held.items():
        timers.arm(owner, at)
    timers.arm(6, 5)  # armed, then cancelled
    order = []
    while (entry := timers.next_due(20)) is not None:
        order.append(entry)
        del held[entry[1]]
    assert order == [(10, 2), (10, 4), (15, 1)]


def test_same_answers_as_a_scan() -> None:
    rng = random.Random(5)
    held: dict[int, int | None] = {}
    timers = Deadlines(lambda o, at: held.get(o) == at)
    now = 0
    for _ in range(5_000):
        owner = rng.randrange(50)
        if rng.random() < 0.3:
            held[owner] = None
        else:
            held[owner] = timers.arm(owner, now + rng.randrange(1, 100))
        now += rng.randrange(0, 3)
        scan = min((at for at in held.values() if at is not None), default=None)
        assert timers.earliest() == scan
        if rng.random() < 0.1:
            due = sorted(o for o, at in held.items() if at is not None and at <= now)
            got = [o for o in timers.due(now) if (at := held.get(o)) is not None
                   and at <= now]
            assert got == due
            for o in due:
                held[o] = None
