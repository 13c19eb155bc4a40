"""CA bundles shaped like trust-manager's: PEM CA certificates concatenated in one value.

``bundle(kib)`` is made once per size (self-signed RSA-2048 CA certificates until the text
reaches ``kib`` KiB; one in three ECDSA, the rest RSA-2048, as in public root stores:
about 1.1 KiB each) and kept under ``CACHE``, so every run and every
namespace holds the same text; ``rotated(bundle, token)`` replaces its last certificate by
a new one, as a bundle gains a new CA. No network: the certificates are made here.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

CACHE = Path("~/.cache/restarter/bench").expanduser()
#: The data key trust-manager's users most often give their bundle's ConfigMap target.
KEY = "ca-certificates.crt"
#: Far from any run: no certificate deadline comes near.
NOT_BEFORE = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
NOT_AFTER = dt.datetime(2045, 1, 1, tzinfo=dt.UTC)
_END = "-----END CERTIFICATE-----\n"


def certificate(name: str, elliptic: bool = False) -> str:
    """One self-signed CA certificate (PEM) with ``name`` as its common name: RSA-2048, or
    ECDSA P-384 (``elliptic``)."""
    key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    if elliptic:
        key = ec.generate_private_key(ec.SECP384R1())
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "PL"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Bench Trust Services"),
            x509.NameAttribute(NameOID.COMMON_NAME, name),
        ]
    )
    built = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOT_BEFORE)
        .not_valid_after(NOT_AFTER)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA384() if elliptic else hashes.SHA256())
    )
    return built.public_bytes(serialization.Encoding.PEM).decode()


def bundle(kib: int) -> str:
    """A bundle of at least ``kib`` KiB of PEM CA certificates (made once, then cached)."""
    path = CACHE / f"ca-bundle-{kib}kib.pem"
    if path.exists():
        return path.read_text()
    parts: list[str] = []
    size = 0
    while size < kib * 1024:
        index = len(parts) + 1
        pem = certificate(f"Bench Root CA {index:03d}", elliptic=index % 3 == 0)
        parts.append(pem)
        size += len(pem)
    text = "".join(parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".tmp").write_text(text)
    path.with_suffix(".tmp").replace(path)
    return text


def count(text: str) -> int:
    """Certificates in a bundle."""
    return text.count(_END)


def rotated(text: str, token: str) -> str:
    """The bundle with its last certificate replaced by a new one named after ``token``."""
    kept = text[: text.rindex(_END, 0, len(text) - len(_END)) + len(_END)]
    return kept + certificate(f"Bench Root CA {token}")
