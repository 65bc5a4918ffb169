"""The master's own certificate authority and serving certificate (ECDSA P-256), made
with ``cryptography``: what a cert-manager-less install serves TLS with. PEM in, PEM out."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Backdated a little: a node whose clock lags the master's still accepts a fresh cert.
CLOCK_SKEW = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class Bundle:
    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _usage(*, signs_certificates: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def new_ca(*, days: int, now: dt.datetime) -> tuple[bytes, bytes]:
    """A self-signed CA (certificate PEM, key PEM) that may sign only leaf certificates."""
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"nfd-master-ca@{int(now.timestamp())}")])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(signs_certificates=True), critical=True)
        .add_extension(ski, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue(
    ca_cert: bytes, ca_key: bytes, *, dns_names: list[str], ips: list[str], days: int, now: dt.datetime
) -> tuple[bytes, bytes]:
    """A serving certificate (PEM, key PEM) for ``dns_names`` and ``ips``, signed by the CA."""
    ca = x509.load_pem_x509_certificate(ca_cert)
    signer = serialization.load_pem_private_key(ca_key, password=None)
    if not isinstance(signer, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    key = _new_key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    not_after = min(now + dt.timedelta(days=days), ca.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(signer, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def ca_problem(ca_cert: bytes, ca_key: bytes, *, min_left: dt.timedelta, now: dt.datetime) -> str:
    """Why the CA cannot sign a new certificate ("" when it can)."""
    try:
        ca = x509.load_pem_x509_certificate(ca_cert)
        key = serialization.load_pem_private_key(ca_key, password=None)
    except ValueError as e:
        return f"the CA does not parse: {e}"
    if key.public_key() != ca.public_key():
        return "the CA key does not match its certificate"
    if ca.not_valid_after_utc - now < min_left:
        return f"the CA expires {ca.not_valid_after_utc:%Y-%m-%d}"
    return ""


def cert_problem(
    b: Bundle, *, dns_names: list[str], ips: list[str], min_left: dt.timedelta, now: dt.datetime
) -> str:
    """Why the serving certificate must be re-issued ("" when it is good to serve)."""
    try:
        ca = x509.load_pem_x509_certificate(b.ca_cert)
        cert = x509.load_pem_x509_certificate(b.cert)
        key = serialization.load_pem_private_key(b.key, password=None)
    except ValueError as e:
        return f"the certificate does not parse: {e}"
    if key.public_key() != cert.public_key():
        return "the key does not match the certificate"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "the certificate is not signed by the CA"
    if cert.not_valid_after_utc - now < min_left:
        return f"the certificate expires {cert.not_valid_after_utc:%Y-%m-%d}"
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "the certificate names no host"
    have = set(san.get_values_for_type(x509.DNSName))
    have |= {str(a) for a in san.get_values_for_type(x509.IPAddress)}
    missing = [n for n in [*dns_names, *ips] if n not in have]
    return f"the certificate does not name {', '.join(missing)}" if missing else ""


def first_dns_name(cert_pem: bytes) -> str | None:
    """The first DNS name (not a wildcard) of the first certificate in ``cert_pem``."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return None
    return next((n for n in san.get_values_for_type(x509.DNSName) if not n.startswith("*")), None)
