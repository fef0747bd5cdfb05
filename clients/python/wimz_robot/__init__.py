"""wimz-robot: the WIM-Z robot's client for the wimz-relay cloud relay.

See :class:`RobotClient` and clients/python/README.md.
"""

from .backoff import Backoff
from .client import ConnectionState, RelayRefused, RobotClient
from .turn import TurnCredentials, TurnFetchError, fetch_turn_credentials

__all__ = ["Backoff", "ConnectionState", "RelayRefused", "RobotClient", "TurnCredentials", "TurnFetchError", "fetch_turn_credentials"]
__version__ = "0.1.0"
