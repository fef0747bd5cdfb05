"""The sealed household (docs/protocol.md "The sealed household (v1.5)"): identity keys, signed
rosters, epoch secrets sealed to each member with HPKE, and frames sealed end to end so that the
relay routes what it cannot read. Built on pyca/cryptography; no primitive of our own."""

from .departures import departure_chain, verify_chain
from .device import SealedDevice
from .epoch import Epoch, accept_statement, accepted_by, new_epoch, open_package, package_info, seal_packages
from .frames import KINDS, Opened, Reason, Rejected, RobotOpener, Sender, associated_data, frame_key, frame_nonce
from .keeper import RosterKeeper
from .keys import Identity, PublicKeys, b64decode, b64encode, key_id
from .roster import Member, Roster, RosterRejected, SignedRoster, verify_next

__all__ = ["Epoch", "Identity", "KINDS", "Member", "Opened", "PublicKeys", "Reason", "Rejected", "RobotOpener", "Roster", "RosterKeeper", "SealedDevice",
           "RosterRejected", "Sender", "SignedRoster", "accept_statement", "accepted_by", "associated_data", "b64decode",
           "b64encode", "departure_chain", "frame_key", "frame_nonce", "key_id", "new_epoch", "open_package", "package_info", "seal_packages",
           "verify_chain", "verify_next"]
