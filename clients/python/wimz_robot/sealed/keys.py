"""Identity keys (docs/protocol.md "The sealed household (v1.5)", "Who holds what"): an Ed25519 key that
signs and an X25519 key that epoch secrets are sealed to (HPKE), made on first use and kept in a
file only their owner reads."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

_RAW_PUBLIC = (serialization.Encoding.Raw, serialization.PublicFormat.Raw)
_RAW_PRIVATE = (serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())


def b64encode(data: bytes) -> str:
    """base64url without padding, the contract's B64."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64decode(text: object) -> bytes:
    """The bytes of a B64 text; ValueError when it is not one (padding and the standard alphabet
    are refused: one text, one encoding)."""
    if not isinstance(text, str) or "=" in text or "+" in text or "/" in text:
        raise ValueError("not base64url without padding")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as error:
        raise ValueError("not base64url without padding") from error


def key_id(sign: bytes, hpke: bytes) -> str:
    """``kid``: the first 16 bytes of SHA-256(Ed25519 public ‖ X25519 public), lower-case hex."""
    return hashlib.sha256(sign + hpke).digest()[:16].hex()


@dataclass(frozen=True)
class PublicKeys:
    """A member's (or the robot's) public half: both raw 32-byte keys and their ``kid``."""

    sign: bytes
    hpke: bytes

    @property
    def kid(self) -> str:
        return key_id(self.sign, self.hpke)

    def to_json(self) -> dict[str, str]:
        return {"kid": self.kid, "sign": b64encode(self.sign), "hpke": b64encode(self.hpke)}

    @property
    def verification_code(self) -> str:
        """What a robot shows or speaks so that a person can check its key on the phone, over no
        path the relay controls: 80 bits of SHA-256(``wimz-sealed-v1 verify`` 0x00 ‖ both public
        keys), base32 in four groups of four (``ABCD-EFGH-IJKL-MNOP``)."""
        digest = hashlib.sha256(b"wimz-sealed-v1 verify\x00" + self.sign + self.hpke).digest()[:10]
        text = base64.b32encode(digest).decode()
        return "-".join(text[i:i + 4] for i in range(0, 16, 4))

    @classmethod
    def from_json(cls, item: Any) -> "PublicKeys":
        """Both keys of ``{"kid","sign","hpke"}``; ValueError when a key is not 32 bytes or the
        ``kid`` is not theirs."""
        if not isinstance(item, dict):
            raise ValueError("keys: not an object")
        keys = cls(b64decode(item.get("sign")), b64decode(item.get("hpke")))
        if len(keys.sign) != 32 or len(keys.hpke) != 32:
            raise ValueError("keys: not 32 bytes each")
        if item.get("kid") != keys.kid:
            raise ValueError("keys: the kid is not the keys'")
        return keys

    def verifies(self, signature: bytes, message: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``message``."""
        try:
            Ed25519PublicKey.from_public_bytes(self.sign).verify(signature, message)
            return True
        except (InvalidSignature, ValueError):
            return False

    def hpke_key(self) -> X25519PublicKey:
        return X25519PublicKey.from_public_bytes(self.hpke)


class Identity:
    """An end's own keys. Never serialised but by :meth:`save`, into a 0600 file."""

    def __init__(self, sign: Ed25519PrivateKey, hpke: X25519PrivateKey) -> None:
        self._sign = sign
        self._hpke = hpke
        self.public = PublicKeys(sign.public_key().public_bytes(*_RAW_PUBLIC), hpke.public_key().public_bytes(*_RAW_PUBLIC))

    @property
    def kid(self) -> str:
        return self.public.kid

    @classmethod
    def generate(cls) -> "Identity":
        return cls(Ed25519PrivateKey.generate(), X25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, sign: bytes, hpke: bytes) -> "Identity":
        return cls(Ed25519PrivateKey.from_private_bytes(sign), X25519PrivateKey.from_private_bytes(hpke))

    @classmethod
    def load_or_create(cls, path: Path) -> "Identity":
        """The identity in ``path``, or a new one written there first (0600, in a directory made
        0700). A file another user can read is refused: the keys may have leaked."""
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            identity = cls.generate()
            identity.save(path)
            return identity
        if mode & 0o077:
            raise PermissionError(f"{path} is readable by others (mode {mode:o}); make a new identity")
        stored = json.loads(path.read_text())
        return cls.from_private_bytes(bytes.fromhex(stored["sign"]), bytes.fromhex(stored["hpke"]))

    def save(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        text = json.dumps({"sign": self._sign.private_bytes(*_RAW_PRIVATE).hex(),
                           "hpke": self._hpke.private_bytes(*_RAW_PRIVATE).hex()})
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(text)

    def sign(self, message: bytes) -> bytes:
        return self._sign.sign(message)

    @property
    def hpke_private(self) -> X25519PrivateKey:
        return self._hpke
