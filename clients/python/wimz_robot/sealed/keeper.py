"""The robot's household rosters over time (docs/protocol.md "The sealed household (v1.5)"): each
roster an owner signs accepted into a new epoch and stored on the relay, the rosters signed while
the robot was away caught up on connect, and the departures signed ahead applied when the robot's
clock reaches them — a guest's end is a new epoch without any owner's app running.

The relay is reached through two calls the client hands in (``store_epoch``, ``pending_rosters``),
so this module holds the rules and the schedule, not a connection."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Protocol

from .device import SealedDevice
from .roster import RosterRejected, SignedRoster

log = logging.getLogger("wimz_robot")


class _Member(Protocol):
    """Who sealed a frame, as the client saw it (``wimz_robot.household.Sender``)."""

    @property
    def access(self) -> str | None: ...


class RosterKeeper:
    """Accepts ``device``'s next rosters and applies its scheduled departures.

    - ``store_epoch(epoch, body)``: PUT the accepted epoch on the relay (a 409, the relay holds it
      already, is success);
    - ``pending_rosters()``: the rosters the relay holds above the current epoch, oldest first;
    - ``relay_failure``: what either raises when the relay did not answer (logged here: the
      roster stands, and the next connect catches up).
    """

    def __init__(self, device: SealedDevice, *, store_epoch: Callable[[int, dict[str, Any]], Awaitable[None]],
                 pending_rosters: Callable[[], Awaitable[list[Any]]], relay_failure: type[Exception]) -> None:
        self.device = device
        self._store_epoch = store_epoch
        self._pending_rosters = pending_rosters
        self._relay_failure = relay_failure
        self._departures_changed = asyncio.Event()

    async def accept(self, signed: dict[str, Any]) -> int:
        """Accepts the household's next roster: verified against the pinned first owner or the
        current roster, a new epoch secret sealed to every member and stored on the relay. The
        departures its owner signed ahead with it (``"departures"``) are scheduled (refused ones
        logged: the roster stands). Returns the new epoch; raises RosterRejected or the relay's
        failure."""
        roster = SignedRoster.from_json(signed)
        body = self.device.accept(roster)
        if signed.get("departures") is not None:
            self.take_departures(signed["departures"])
        epoch = roster.roster.epoch
        await self._store_epoch(epoch, body)
        return epoch

    async def accept_frame(self, frame: dict[str, Any]) -> None:
        """A roster an owner signed, handed over by the relay: accepted if it verifies, else logged."""
        try:
            await self.accept({key: frame.get(key) for key in ("roster", "by", "sig", "departures")})
        except RosterRejected as refusal:
            log.warning("roster refused: %s", refusal)
        except self._relay_failure as error:
            log.warning("epoch not stored on the relay: %s", error)

    async def catch_up(self) -> None:
        """On every connect: the rosters owners signed while this robot was away, oldest first;
        then the current epoch once more, in case it was accepted while the relay could not be
        told (a scheduled departure; the relay answers 409 when it holds it)."""
        try:
            pending = await self._pending_rosters()
        except self._relay_failure as error:
            log.warning("pending rosters not read: %s", error)
            return
        for signed in pending:
            await self.accept_frame(signed)
        if self.device.signed is not None:
            await self.accept_frame(self.device.signed.to_json())

    def schedule(self, message: dict[str, Any], sender: _Member | None) -> None:
        """An owner's chain of departures (``roster_schedule``, sealed): kept, and the
        scheduler woken; refused (logged) from anyone else or when it does not verify."""
        if sender is None or sender.access != "owner":
            log.warning("roster_schedule from a member who is not an owner: ignored")
            return
        self.take_departures(message.get("rosters"))

    def take_departures(self, rosters: Any) -> None:
        """A chain of departures from the current roster, each signed by an owner of the one
        before (``verify_chain``): kept, and the scheduler woken; logged when it is refused."""
        try:
            if not isinstance(rosters, list):
                raise RosterRejected("departures: no list of rosters")
            self.device.schedule_departures([SignedRoster.from_json(item) for item in rosters])
        except RosterRejected as refusal:
            log.warning("departures refused: %s", refusal)
            return
        self._departures_changed.set()

    async def apply_departures(self) -> None:
        """Runs for the client's life: accepts each scheduled departure when this robot's clock
        reaches its ``made``. Checks at least once a minute, so a clock set forward is noticed."""
        while True:
            self._departures_changed.clear()
            due = self.device.next_departure()
            wait = 60.0 if due is None else min(60.0, due.roster.made / 1000 - time.time())
            if due is not None and wait <= 0:
                log.info("a guest's end: epoch %d", due.roster.epoch)
                try:
                    await self.accept_frame(due.to_json())
                except Exception:  # one failing roster must not end the schedule
                    log.exception("a departure failed")
                if self.device.next_departure() is not due:
                    continue
                wait = 60.0  # not taken (say, the state file could not be written; logged): again in a minute
            try:
                await asyncio.wait_for(self._departures_changed.wait(), timeout=wait)
            except TimeoutError:
                pass
