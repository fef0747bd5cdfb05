"""A sealed device as the robot keeps it (docs/protocol.md "The sealed household (v1.5)"): its
identity, the first owner it pinned, the current epoch and the one before, the departures an
owner scheduled, in a directory only its user reads. :class:`wimz_robot.RobotClient` seals and
opens every frame through it."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..protocol import RELAY_EVENTS
from .departures import verify_chain
from .epoch import Epoch, new_epoch, upload_body
from .frames import KINDS, SETTINGS_KIND, Opened, Rejected, RobotOpener, Sender
from .keys import Identity, PublicKeys, b64decode, b64encode
from .roster import Roster, RosterRejected, SignedRoster, verify_next

log = logging.getLogger("wimz_robot.sealed")

#: Unsealed frames a sealed robot still reads: the relay's own and the seal's own bookkeeping.
UNSEALED_TYPES = frozenset({"roster", "epoch", "error", "pong"})


@dataclass(frozen=True)
class Inner:
    """An app's frame opened: the v1–v1.4 message inside and the roster member who sealed it."""

    message: dict[str, Any]
    opened: Opened


class SealedDevice:
    """One robot's seal: ``identity.json`` and ``state.json`` (the pinned first owner, the
    current and previous epochs with their secrets, the scheduled departures) in ``directory``,
    both 0600 in a 0700 directory. Until a first owner is pinned and a first epoch accepted, the
    device is not sealed and the client speaks v1–v1.4."""

    def __init__(self, directory: Path, device_id: str) -> None:
        self.directory = directory
        self.device_id = device_id
        self.identity = Identity.load_or_create(directory / "identity.json")
        self.first_owner: PublicKeys | None = None
        self.opener = RobotOpener(device_id)
        #: The current epoch's roster as the owner signed it (what a re-upload sends again).
        self.signed: SignedRoster | None = None
        #: The next rosters an owner signed ahead, each due at its ``made`` (wimz_robot.sealed.departures).
        self.departures: list[SignedRoster] = []
        #: Frames (and rosters, as ``roster``) refused since start, by reason (each one is also logged).
        self.rejected: dict[str, int] = {}
        #: The desired settings version last applied (v1.6): a sealed document applies only above it.
        self.settings_version = 0
        self._load()

    @property
    def sealed(self) -> bool:
        return self.opener.current is not None

    @property
    def epoch(self) -> Epoch | None:
        return self.opener.current

    def pin_first_owner(self, owner: PublicKeys) -> None:
        """Pins the first owner's key, learned over a path the relay does not control (the home
        Wi-Fi, or a code). Refused once a first owner is pinned: ownership then moves by rosters."""
        if self.first_owner is not None and self.first_owner != owner:
            raise RosterRejected("a first owner is already pinned")
        self.first_owner = owner
        self._save()

    def unpin_first_owner(self) -> None:
        """Starts the pairing over after a wrong one (the person saw another verification code
        than their app's): forgets the pinned first owner, so the next pairing window pins
        again. Only before the first epoch; RosterRejected after it, when a roster that owner
        signed governs the household and only a new roster moves ownership."""
        if self.opener.current is not None:
            raise RosterRejected("the household has an epoch: ownership moves by rosters now")
        if self.first_owner is not None:
            log.warning("first owner unpinned: kid %s", self.first_owner.kid)
        self.first_owner = None
        self._save()

    def accept(self, signed: SignedRoster, now: float | None = None) -> dict[str, Any]:
        """Verifies the next roster, draws its epoch secret and makes it current (the previous
        one stays open for 60 s). Returns the body the robot uploads with
        ``PUT …/sealed/epochs/{E}``; RosterRejected when it does not follow. The roster it holds
        already (a roster can arrive twice: as a frame and when the robot catches up, or after an
        upload that failed) gives that epoch's body again, as the owner signed it, its packages
        sealed afresh."""
        current = self.opener.current
        if current is not None and self.signed is not None and signed.roster.raw == current.roster.raw:
            return upload_body(self.signed, current.secret, self.identity)
        try:
            roster = verify_next(signed, previous=current.roster if current else None, device_id=self.device_id,
                                 robot=self.identity.public, first_owner=self.first_owner)
        except RosterRejected as refusal:
            self._count("roster", str(refusal))
            if self.departures and self.departures[0].roster.raw == signed.roster.raw:
                self.departures = []  # a schedule that no longer follows is not tried again
                self._save()
            raise
        self.signed = SignedRoster(roster, signed.by, signed.sig)
        # The schedule goes on only if this was its next roster; any other ends it.
        self.departures = self.departures[1:] if self.departures and self.departures[0].roster.raw == roster.raw else []
        epoch, body = new_epoch(self.signed, self.identity)
        self.opener.announce(epoch, now)
        self._save()
        log.info("epoch %d accepted: %d members", epoch.number, len(roster.members))
        return body

    def schedule_departures(self, chain: list[SignedRoster]) -> None:
        """Keeps an owner's chain of departures from the current roster (it replaces any
        earlier one); RosterRejected, counted and logged, when it is not one."""
        current = self.opener.current
        try:
            if current is None:
                raise RosterRejected("no epoch to schedule from")
            self.departures = verify_chain(chain, current.roster)
        except RosterRejected as refusal:
            self._count("roster", f"departures: {refusal}")
            raise
        self._save()
        log.info("departures scheduled: %d rosters, the next at %d", len(chain), chain[0].roster.made)

    def next_departure(self) -> SignedRoster | None:
        """The scheduled roster that comes next (its ``made`` may still be ahead), or None."""
        return self.departures[0] if self.departures else None

    def sender(self) -> Sender:
        """A new connection's sealing (a fresh sid)."""
        return Sender(self.identity, self.device_id)

    def seal(self, sender: Sender, message: dict[str, Any]) -> dict[str, Any]:
        """``message`` as a sealed frame of the current epoch; its ``kind`` is the event's name
        when the relay may see it (push, replay), ``mission_completed`` for a completed mission's
        progress, else none."""
        epoch = self.opener.current
        if epoch is None:
            raise RuntimeError("not sealed")
        name = message.get("event") if message.get("type") == "event" else None
        data = message.get("data")
        if name == "mission_progress" and isinstance(data, dict) and data.get("status") == "completed":
            name = "mission_completed"
        kind = name if isinstance(name, str) and name in KINDS else None
        return sender.seal(epoch, json.dumps(message, separators=(",", ":")).encode(), kind)

    #: What each lock-screen policy lets the relay see of a mission's progress (v1.4's fields).
    LOCK_SCREEN_FIELDS = {"status": ("status", "stage", "total_stages", "progress"),
                          "full": ("status", "trick", "stage", "total_stages", "dog_name", "rewards", "progress", "target_sec")}

    def lock_screen(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The unsealed ``lock_screen`` frame that goes with a ``mission_progress`` event, with
        only what the roster's policy allows (``off``: none), or None."""
        epoch = self.opener.current
        data = message.get("data")
        if epoch is None or message.get("type") != "event" or message.get("event") != "mission_progress" or not isinstance(data, dict):
            return None
        fields = self.LOCK_SCREEN_FIELDS.get(epoch.roster.lock_screen)
        if fields is None:
            return None
        return {"type": "lock_screen", "data": {field: data[field] for field in fields if field in data}}

    def open(self, frame: dict[str, Any]) -> Inner | None:
        """An app's sealed frame opened, or None (dropped unread, counted and logged)."""
        try:
            opened = self.opener.open(frame)
            message = json.loads(opened.plaintext)
            if not isinstance(message, dict):
                raise ValueError("not a JSON object")
            return Inner(message, opened)
        except Rejected as refusal:
            self._count(refusal.reason.value, str(refusal))
        except ValueError as error:
            self._count("malformed", f"sealed content: {error}")
        return None

    def open_settings(self, envelope: dict[str, Any]) -> dict[str, Any] | None:
        """The document inside a relay's ``{"type":"settings","version":V,"doc":SEALED}`` (v1.6),
        or None (counted and logged): it opens (any age, either epoch held), its plaintext is
        ``{"type":"settings","version":V,"doc":{…}}`` with V the envelope's, and V is above the
        version last applied (an old document is never applied as a new one)."""
        version = envelope.get("version")
        try:
            opened = self.opener.open_settings(envelope.get("doc"))  # type: ignore[arg-type]
            inner = json.loads(opened.plaintext)
        except Rejected as refusal:
            self._count(refusal.reason.value, f"settings: {refusal}")
            return None
        except ValueError as error:
            self._count("malformed", f"sealed settings: {error}")
            return None
        if not isinstance(inner, dict) or inner.get("type") != "settings" or not isinstance(inner.get("doc"), dict):
            self._count("malformed", "sealed settings are not a settings frame")
            return None
        if inner.get("version") != version or not isinstance(version, int) or version <= self.settings_version:
            self._count("replayed", f"settings version {inner.get('version')!r} under envelope {version!r}, last applied {self.settings_version}")
            return None
        doc: dict[str, Any] = inner["doc"]
        return doc

    def applied_settings(self, sender: Sender, version: int, doc: dict[str, Any]) -> dict[str, Any]:
        """The robot's ``settings_applied`` for a sealed device: its envelope in clear for the relay,
        the document sealed (kind ``settings``); ``version`` is remembered as applied."""
        epoch = self.opener.current
        if epoch is None:
            raise RuntimeError("not sealed")
        if version > self.settings_version:
            self.settings_version = version
            self._save()
        inner = {"type": "settings_applied", "version": version, "doc": doc}
        sealed = sender.seal(epoch, json.dumps(inner, separators=(",", ":")).encode(), SETTINGS_KIND)
        return {"type": "settings_applied", "version": version, "doc": sealed}

    def reads_unsealed(self, message: dict[str, Any]) -> bool:
        """Whether a sealed robot reads this unsealed frame: the relay's own events and the
        seal's bookkeeping only. Anything else would let a relay speak for an app."""
        kind = message.get("type")
        if (kind == "event" and message.get("event") in RELAY_EVENTS) or kind in UNSEALED_TYPES:
            return True
        self._count("unsealed", f"an unsealed {kind!r} frame on a sealed device")
        return False

    def _count(self, reason: str, detail: str) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + 1
        log.warning("sealed frame dropped (%s): %s", reason, detail)

    # -- the state file ----------------------------------------------------------------------

    def _load(self) -> None:
        path = self.directory / "state.json"
        if not path.exists():
            return
        if path.stat().st_mode & 0o077:
            raise PermissionError(f"{path} is readable by others; it holds epoch secrets")
        state = json.loads(path.read_text())
        if state.get("first_owner"):
            self.first_owner = PublicKeys.from_json(state["first_owner"])
        for item in state.get("epochs", []):  # the previous epoch first, then the current one
            epoch = Epoch(Roster.parse(b64decode(item["roster"])), bytes.fromhex(item["secret"]))
            self.opener.announce(epoch, time.monotonic() - 3600)  # a restart ends the previous epoch's grace
        if state.get("signed"):
            self.signed = SignedRoster.from_json(state["signed"])
        self.departures = [SignedRoster.from_json(item) for item in state.get("departures", [])]
        self.settings_version = int(state.get("settings_version", 0))

    def _save(self) -> None:
        epochs = [epoch for epoch in (self.opener.previous, self.opener.current) if epoch is not None]
        state = {"first_owner": self.first_owner.to_json() if self.first_owner else None,
                 "epochs": [{"roster": b64encode(e.roster.raw), "secret": e.secret.hex()} for e in epochs],
                 "signed": self.signed.to_json() if self.signed else None,
                 "departures": [signed.to_json() for signed in self.departures], "settings_version": self.settings_version}
        temporary = self.directory / "state.json.new"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            json.dump(state, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.directory / "state.json")
