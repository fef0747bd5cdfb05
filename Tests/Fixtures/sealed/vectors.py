"""Test vectors for the sealed household (docs/protocol.md "The sealed household (v1.5)"), computed from
the primitives alone: HMAC-SHA256 for HKDF and HPKE's labelled key schedule (RFC 5869, RFC 9180
section 4 to 5.2, written out here), raw X25519, AES-128-GCM, ChaCha20-Poly1305 and Ed25519 from
pyca/cryptography. No code of either library takes part, so a library that agrees with these
bytes agrees with the contract, not with itself. HPKE's ephemeral key is fixed here (the libraries
draw theirs): the libraries open the package, and pyca's own HPKE opens it too
(clients/python/tests/test_sealed_vectors.py).

    python3 Tests/Fixtures/sealed/vectors.py > Tests/Fixtures/sealed/vectors.json

Every key is derived from a label, so the output is the same on every run."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import struct
import sys
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

DEVICE = "wimz-vector-1"
RAW = (serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def seed(label: str) -> bytes:
    return hashlib.sha256(b"wimz vector " + label.encode()).digest()


def hkdf_extract(salt: bytes, ikm: bytes) -> bytes:
    return hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()


def hkdf_expand(prk: bytes, info: bytes, length: int) -> bytes:
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out, counter = out + block, counter + 1
    return out[:length]


def identity(label: str) -> dict[str, Any]:
    sign, hpke = seed(label + " sign"), seed(label + " hpke")
    sign_public = Ed25519PrivateKey.from_private_bytes(sign).public_key().public_bytes(*RAW)
    hpke_public = X25519PrivateKey.from_private_bytes(hpke).public_key().public_bytes(*RAW)
    kid = hashlib.sha256(sign_public + hpke_public).digest()[:16].hex()
    return {"kid": kid, "sign_private": sign.hex(), "hpke_private": hpke.hex(),
            "sign": b64(sign_public), "hpke": b64(hpke_public)}


def verification_code(member: dict[str, Any]) -> str:
    """80 bits of SHA-256 over the label and both public keys, base32 in four groups of four."""
    raw = base64.urlsafe_b64decode(member["sign"] + "=") + base64.urlsafe_b64decode(member["hpke"] + "=")
    text = base64.b32encode(hashlib.sha256(b"wimz-sealed-v1 verify\x00" + raw).digest()[:10]).decode()
    return "-".join(text[i:i + 4] for i in range(0, 16, 4))


def ed25519(private_hex: str, message: bytes) -> bytes:
    return Ed25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex)).sign(message)


# RFC 9180: DHKEM(X25519, HKDF-SHA256) = 0x0020, HKDF-SHA256 = 0x0001, AES-128-GCM = 0x0001, base mode.
KEM_SUITE = b"KEM" + struct.pack(">H", 0x0020)
HPKE_SUITE = b"HPKE" + struct.pack(">HHH", 0x0020, 0x0001, 0x0001)


def labeled_extract(suite: bytes, salt: bytes, label: bytes, ikm: bytes) -> bytes:
    return hkdf_extract(salt, b"HPKE-v1" + suite + label + ikm)


def labeled_expand(suite: bytes, prk: bytes, label: bytes, info: bytes, length: int) -> bytes:
    return hkdf_expand(prk, struct.pack(">H", length) + b"HPKE-v1" + suite + label + info, length)


def hpke_seal(recipient_public: bytes, ephemeral_private: bytes, info: bytes, plaintext: bytes) -> tuple[bytes, bytes]:
    ephemeral = X25519PrivateKey.from_private_bytes(ephemeral_private)
    enc = ephemeral.public_key().public_bytes(*RAW)
    dh = ephemeral.exchange(X25519PublicKey.from_public_bytes(recipient_public))
    eae_prk = labeled_extract(KEM_SUITE, b"", b"eae_prk", dh)
    shared = labeled_expand(KEM_SUITE, eae_prk, b"shared_secret", enc + recipient_public, 32)
    context = (b"\x00" + labeled_extract(HPKE_SUITE, b"", b"psk_id_hash", b"")
               + labeled_extract(HPKE_SUITE, b"", b"info_hash", info))
    secret = labeled_extract(HPKE_SUITE, shared, b"secret", b"")
    key = labeled_expand(HPKE_SUITE, secret, b"key", context, 16)
    nonce = labeled_expand(HPKE_SUITE, secret, b"base_nonce", context, 12)
    return enc, AESGCM(key).encrypt(nonce, plaintext, b"")


def joined(*parts: object) -> bytes:
    return b"\x00".join(str(part).encode() for part in parts)


def main() -> None:
    robot, owner, family = identity("robot"), identity("owner"), identity("family")

    def public(member: dict[str, Any]) -> dict[str, Any]:
        return {"kid": member["kid"], "sign": member["sign"], "hpke": member["hpke"]}

    roster = {"device_id": DEVICE, "epoch": 1, "prev": None, "made": 1_795_000_000_000,
              "robot": public(robot),
              "members": [public(owner) | {"role": "owner", "control": True, "until": None, "label": "Alex's iPhone"},
                          public(family) | {"role": "family", "control": True, "until": None, "label": "Sam"}],
              "lock_screen": "status"}
    roster_bytes = json.dumps(roster, separators=(",", ":")).encode()
    roster_hash = hashlib.sha256(roster_bytes).hexdigest()
    epoch_secret = seed("epoch secret 1")
    info = b"wimz-sealed-v1 epoch\x00" + joined(DEVICE, 1, roster_hash)
    ephemeral = seed("hpke ephemeral for family")
    enc, sealed = hpke_seal(base64.urlsafe_b64decode(family["hpke"] + "=" * (-len(family["hpke"]) % 4)),
                            ephemeral, info, epoch_secret)
    accept = b"wimz-sealed-v1 accept\x00" + joined(DEVICE, 1, roster_hash)

    frames = []
    for sender, sid_label, n, ts, kind, plaintext in (
            (robot, "robot sid", 7, 1_795_000_060_123, "bark_detected",
             b'{"type":"event","event":"bark_detected","data":{"confidence":0.93,"timestamp":1795000060.1}}'),
            (family, "family sid", 1, 1_795_000_061_000, "",
             b'{"type":"command","command":"treat","data":{"count":1}}')):
        sid = seed(sid_label)[:16]
        sid_text = b64(sid)
        aad = b"wimz-sealed-v1\x00" + joined(DEVICE, 1, sender["kid"], sid_text, n, ts, kind)
        key = hkdf_expand(hkdf_extract(sid, epoch_secret), b"wimz-sealed-v1 frame\x00" + joined(DEVICE, sender["kid"]), 32)
        nonce = bytes(4) + struct.pack(">Q", n)
        ct = ChaCha20Poly1305(key).encrypt(nonce, plaintext, aad)
        frame: dict[str, Any] = {"type": "sealed", "v": 1, "epoch": 1, "kid": sender["kid"], "sid": sid_text, "n": n, "ts": ts}
        if kind:
            frame["kind"] = kind
        frame |= {"ct": b64(ct), "sig": b64(ed25519(sender["sign_private"], aad + ct))}
        frames.append({"sender": "robot" if sender is robot else "family", "plaintext": plaintext.decode(),
                       "aad": b64(aad), "key": key.hex(), "nonce": nonce.hex(), "frame": frame})

    # Departures signed ahead: a roster with a guest whose access ends, and the next roster
    # without the guest, made at that end, as an owner's end signs it for the robot to keep.
    sitter = identity("sitter")
    end = 1_795_003_600_000
    with_guest = roster | {"members": roster["members"] + [public(sitter) | {"role": "guest", "control": False, "until": end,
                                                                               "label": "Sitter"}]}
    with_guest_bytes = json.dumps(with_guest, separators=(",", ":")).encode()
    departure = roster | {"epoch": 2, "prev": hashlib.sha256(with_guest_bytes).hexdigest(), "made": end}
    departure_bytes = json.dumps(departure, separators=(",", ":")).encode()

    json.dump({
        "about": "Computed by Tests/Fixtures/sealed/vectors.py from the primitives; see docs/protocol.md.",
        "device_id": DEVICE,
        "identities": {"robot": robot, "owner": owner, "family": family},
        "robot_verification_code": verification_code(robot),
        "roster": {"bytes": b64(roster_bytes), "hash": roster_hash,
                   "signed": {"roster": b64(roster_bytes), "by": owner["kid"], "sig": b64(ed25519(owner["sign_private"], roster_bytes))}},
        "epoch": {"number": 1, "secret": epoch_secret.hex(), "info": b64(info),
                  "package": {"kid": family["kid"], "sealed": b64(enc + sealed)},
                  "robot_sig": b64(ed25519(robot["sign_private"], accept))},
        "frames": frames,
        "departures": {"roster": b64(with_guest_bytes), "now": end - 60_000,
                       "chain": [{"roster": b64(departure_bytes), "by": owner["kid"],
                                  "sig": b64(ed25519(owner["sign_private"], departure_bytes))}]},
    }, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
