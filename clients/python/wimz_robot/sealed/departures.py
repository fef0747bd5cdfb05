"""A guest's end while no owner's app runs (docs/protocol.md "Sealed devices (v1.5)").

A new epoch needs a roster an owner signed, and the robot signs none. So an owner's app signs
the departures ahead: for the current roster, the chain of next rosters that each take out the
guests whose ``until`` has come, each one's ``made`` that ``until``. It hands the chain to the
robot in a sealed ``{"type":"roster_schedule","rosters":[…]}`` frame; the robot keeps it and
accepts each roster when its own clock reaches its ``made``, as it accepts any roster. Any other
roster accepted in between (an invitation, a removal) ends the chain: it no longer follows.

A scheduled roster can only take members out, and only those whose ``until`` has come by its
``made``; the chain is verified whole when it arrives, and each roster again as it is accepted."""

from __future__ import annotations

from ..protocol import MAX_SCHEDULED_DEPARTURES
from .keys import Identity
from .roster import Roster, RosterRejected, SignedRoster, verify_next


def departure_chain(current: Roster, owner: Identity, now_ms: int) -> list[SignedRoster]:
    """What an owner's end signs for ``current``: one roster per distinct future ``until``,
    each without the members whose end has come (empty when no member has one)."""
    ends = sorted({member.until for member in current.members if member.until is not None and member.until > now_ms})
    chain: list[SignedRoster] = []
    previous = current
    for end in ends[:MAX_SCHEDULED_DEPARTURES]:
        staying = [member for member in previous.members if member.active(end)]
        roster = Roster.make(current.device_id, previous.epoch + 1, previous.hash, end, current.robot, staying,
                             current.lock_screen)
        chain.append(roster.signed(owner))
        previous = roster
    return chain


def verify_chain(chain: list[SignedRoster], current: Roster) -> list[SignedRoster]:
    """``chain`` when it schedules departures from ``current``; RosterRejected otherwise: each
    roster follows the one before (``verify_next``'s rules), comes later, keeps the lock-screen
    policy, and drops at least one member, each past its ``until`` at its ``made``, keeping the
    others exactly as they were."""
    if not chain or len(chain) > MAX_SCHEDULED_DEPARTURES:
        raise RosterRejected(f"a schedule holds 1 to {MAX_SCHEDULED_DEPARTURES} rosters")
    previous = current
    for signed in chain:
        roster = verify_next(signed, previous=previous, device_id=current.device_id, robot=current.robot)
        kept = set(roster.members)
        gone = [member for member in previous.members if member not in kept]
        if roster.made <= previous.made or roster.lock_screen != previous.lock_screen:
            raise RosterRejected("a scheduled roster comes later and keeps the lock-screen policy")
        if not gone or not kept <= set(previous.members) or any(member.active(roster.made) for member in gone):
            raise RosterRejected("a scheduled roster only takes out members whose end has come")
        previous = roster
    return chain
