"""wimz-robot: the WIM-Z robot's client for the wimz-relay cloud relay.

See :class:`RobotClient` and clients/python/README.md.
"""

from ._version import __version__
from .backoff import Backoff
from .client import ConnectionState, RelayRefused, RobotClient
from .household import AppToken, Sender
from .turn import TurnCredentials, TurnFetchError, fetch_turn_credentials

__all__ = ["__version__", "AppToken", "Backoff", "Sender", "ConnectionState", "RelayRefused", "RobotClient", "TurnCredentials", "TurnFetchError", "fetch_turn_credentials"]
