"""Self-signed X.509 certificates with the expiry a test needs (their keys never leave the
test)."""

from __future__ import annotations

import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY = ec.generate_private_key(ec.SECP256R1())


def self_signed(not_after: dt.datetime, name: str = "test.example") -> bytes:
    """A PEM certificate valid from a day before ``not_after`` (whole seconds) to it."""
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    made = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(KEY.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_after - dt.timedelta(days=1))
        .not_valid_after(not_after.replace(microsecond=0))
        .sign(KEY, hashes.SHA256())
    )
    return made.public_bytes(serialization.Encoding.PEM)


def private_key() -> bytes:
    """The certificates' private key, as PEM (a value a source may hold beside them)."""
    return KEY.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
