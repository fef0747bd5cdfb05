"""The robot's settings (docs/protocol.md "The robot's settings", v1.6): the household writes the
desired document at the relay, which hands it to the robot when it connects and on every change;
the robot applies what it can and says what it now runs.

::

    @client.settings
    async def apply(doc):
        volume = min(doc.get("volume", 0.5), 0.8)   # a value it refuses is capped
        speaker.set_volume(volume)
        return {**doc, "volume": volume}            # what it runs (None: the document as asked)

On a sealed device (v1.5) the document arrives sealed and is opened here (any age, either epoch
the robot holds, only a version above the last applied); the answer goes back sealed."""

from __future__ import annotations

import logging
from typing import Any, Awaitable, Callable

from .sealed import SealedDevice, Sender

log = logging.getLogger("wimz_robot.settings")

#: Called with the desired document; returns the document the robot now runs (None: as asked).
SettingsHandler = Callable[[dict[str, Any]], Any]


async def applied(frame: dict[str, Any], handler: SettingsHandler, sealed: SealedDevice | None,
                  sealer: Callable[[], Sender], call: Callable[[SettingsHandler, Any], Awaitable[Any]]) -> dict[str, Any] | None:
    """The ``settings_applied`` answer to the relay's ``{"type":"settings","version":V,"doc":…}``,
    or None when the frame is dropped (logged): malformed, or on a sealed device not one to apply."""
    version = frame.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        log.warning("settings frame without a version: dropped")
        return None
    is_sealed = sealed is not None and sealed.sealed
    doc = sealed.open_settings(frame) if is_sealed and sealed is not None else frame.get("doc")
    if not isinstance(doc, dict):
        if not is_sealed:
            log.warning("settings frame without a document: dropped")
        return None
    result = await call(handler, doc)
    runs = doc if result is None else result
    if not isinstance(runs, dict):
        raise TypeError(f"a settings handler returns the document it runs (a dict) or None, not {type(runs).__name__}")
    if is_sealed and sealed is not None:
        return sealed.applied_settings(sealer(), version, runs)
    return {"type": "settings_applied", "version": version, "doc": runs}
