"""Tenants: who a caller is, from their API key, and what of theirs the server keeps apart.

Keys come from the settings: ``api_key`` (one key, tenant ``default``), ``api_keys``
(``"tenant-a:key1,key2;tenant-b:key3"``) and ``api_keys_file`` (a JSON object
``{"tenant-a": ["key1", "key2"], ...}``); a tenant may hold several keys. Without any key the
server is unauthenticated and every caller is tenant ``default`` (local use).

A tenant's uploaded documents and vector-store namespaces are invisible to other tenants (their
ids answer 404), and with several tenants each tenant's LLM prompts get their own vLLM prefix-cache
salt, so one tenant cannot probe another's prompts through cache timing. A salt is an HMAC of the
tenant's name under the server's secret (`secret` setting, else a random one kept in the cache
folder), so nobody who knows a tenant's name can compute it; a new secret rotates every salt."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
from pathlib import Path

DEFAULT_TENANT = "default"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class Tenants:
    """API key -> tenant. `tenant_of(key)` is None for an unknown key; `open` when no key is set."""

    def __init__(self, keys: dict[str, str], secret: str | None = None) -> None:
        self._keys = dict(keys)
        self.names = sorted(set(keys.values()))
        self._secret_setting = secret
        self._secret: bytes | None = None  # read (or made) on the first salt

    def salt(self, tenant: str) -> str:
        """The vLLM prefix-cache salt of `tenant`'s prompts (see the module docstring)."""
        if self._secret is None:
            self._secret = load_secret(self._secret_setting)
        return cache_salt(self._secret, tenant)

    @property
    def open(self) -> bool:
        """No API keys configured: every caller is the default tenant."""
        return not self._keys

    @property
    def several(self) -> bool:
        """More than one tenant: prompts are cache-salted per tenant."""
        return len(self.names) > 1

    def caller(self, authorization: str) -> str | None:
        """The tenant of a request from its ``Authorization`` header value: ``default`` when the
        server is open, else the tenant of its ``Bearer`` key, or None (unknown or missing key)."""
        if self.open:
            return DEFAULT_TENANT
        scheme, _, token = authorization.partition(" ")
        return self.tenant_of(token.strip()) if scheme.lower() == "bearer" else None

    def tenant_of(self, key: str) -> str | None:
        """The tenant holding `key` (compared in constant time), or None."""
        found = None
        for known, tenant in self._keys.items():
            if secrets.compare_digest(known.encode(), key.encode()):
                found = tenant
        return found

    @classmethod
    def from_settings(
        cls, api_key: str | None, api_keys: str | None, api_keys_file: str | None, secret: str | None = None
    ) -> Tenants:
        """Parse the three key settings; ValueError naming the setting and the problem."""
        keys: dict[str, str] = {}
        if api_key:
            _add(keys, DEFAULT_TENANT, api_key, "api_key")
        if api_keys is not None:
            named = 0
            for i, group in enumerate(g for g in api_keys.split(";") if g.strip()):
                tenant, sep, listed = group.partition(":")
                if not sep:
                    raise ValueError(
                        f"api_keys (TEOLA_API_KEYS) group {i}: expected 'tenant:key1,key2', got {group!r}"
                    )
                for key in listed.split(","):
                    _add(keys, tenant.strip(), key.strip(), "api_keys")
                    named += 1
            if not named:
                raise ValueError(
                    f"api_keys (TEOLA_API_KEYS) {api_keys!r} names no key, which would leave the server "
                    "open to everyone; give 'tenant-a:key1,key2;tenant-b:key3', or unset it"
                )
        if api_keys_file:
            path = Path(api_keys_file)
            try:
                data = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise ValueError(
                    f"api_keys_file {str(path)!r}: cannot read a JSON object of tenant -> keys: {exc}"
                ) from None
            if not isinstance(data, dict):
                raise ValueError(f"api_keys_file {str(path)!r}: expected a JSON object {{tenant: [keys]}}")
            for tenant, listed in data.items():
                if not isinstance(listed, list) or not all(isinstance(k, str) for k in listed):
                    raise ValueError(
                        f"api_keys_file {str(path)!r}: tenant {tenant!r} needs a list of key strings"
                    )
                if not listed:
                    raise ValueError(
                        f"api_keys_file {str(path)!r}: tenant {tenant!r} has no key; give it at least "
                        "one or remove it"
                    )
                for key in listed:
                    _add(keys, tenant, key, "api_keys_file")
            if not data:
                raise ValueError(
                    f"api_keys_file {str(path)!r} names no tenant, which would leave the server open to "
                    'everyone; write {"tenant-a": ["key1"], ...} into it, or unset the setting'
                )
        return cls(keys, secret)


def _add(keys: dict[str, str], tenant: str, key: str, where: str) -> None:
    if not NAME.match(tenant):
        raise ValueError(f"{where}: tenant name {tenant!r} must be 1-64 letters, digits, '_', '.' or '-'")
    if not key:
        raise ValueError(f"{where}: tenant {tenant!r} has an empty key")
    if keys.get(key, tenant) != tenant:
        raise ValueError(f"{where}: one key is given to two tenants ({keys[key]!r} and {tenant!r})")
    keys[key] = tenant


def namespace_for(tenant: str, namespace: str) -> str:
    """The vector-store namespace a tenant's `namespace` maps to (tenants never share one)."""
    return f"tenant:{tenant}/{namespace}"


def cache_salt(secret: bytes, tenant: str) -> str:
    """The vLLM prefix-cache salt of a tenant's prompts: HMAC-SHA256 of its name under the secret."""
    return hmac.new(secret, f"teola-tenant:{tenant}".encode(), hashlib.sha256).hexdigest()[:32]


SECRET_FILE = "server-secret"


def load_secret(configured: str | None, folder: Path | None = None) -> bytes:
    """The server secret: the configured one, else the random one kept in `<cache>/server-secret`
    (made, readable by its owner only, on first use; salts then survive restarts)."""
    if configured:
        return configured.encode()
    if folder is None:
        from engines.assets.paths import cache_dir

        folder = cache_dir()
    path = Path(folder) / SECRET_FILE
    if not path.exists():
        _make_secret(path)
    secret = path.read_text().strip()
    if not secret:
        raise ValueError(
            f"the server secret file {str(path)!r} is empty; delete it (a new secret is made; every "
            "tenant's cache salt changes) or set the secret setting (env TEOLA_SECRET)"
        )
    return secret.encode()


def _make_secret(path: Path) -> None:
    """Write a new random secret to `path` whole or not at all: it is written to a file of its own
    and linked into place, so another process never reads a half-written (empty) secret; if one
    made the file first, its secret stands."""
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
    finally:
        draft.unlink(missing_ok=True)
