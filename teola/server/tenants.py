"""Tenants: who a caller is, from their API key, and what of theirs the server keeps apart.

Keys come from the settings: ``api_key`` (one key, tenant ``default``), ``api_keys``
(``"tenant-a:key1,key2;tenant-b:key3"``) and ``api_keys_file`` (a JSON object
``{"tenant-a": ["key1", "key2"], ...}``); a tenant may hold several keys. Without any key the
server is unauthenticated and every caller is tenant ``default`` (local use).

A tenant's uploaded documents and vector-store namespaces are invisible to other tenants (their
ids answer 404), and with several tenants each tenant's LLM prompts get their own vLLM prefix-cache
salt, so one tenant cannot probe another's prompts through cache timing."""
from __future__ import annotations

import hashlib
import json
import re
import secrets
from pathlib import Path

DEFAULT_TENANT = "default"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class Tenants:
    """API key -> tenant. `tenant_of(key)` is None for an unknown key; `open` when no key is set."""

    def __init__(self, keys: dict[str, str]) -> None:
        self._keys = dict(keys)
        self.names = sorted(set(keys.values()))

    @property
    def open(self) -> bool:
        """No API keys configured: every caller is the default tenant."""
        return not self._keys

    @property
    def several(self) -> bool:
        """More than one tenant: prompts are cache-salted per tenant."""
        return len(self.names) > 1

    def tenant_of(self, key: str) -> str | None:
        """The tenant holding `key` (compared in constant time), or None."""
        found = None
        for known, tenant in self._keys.items():
            if secrets.compare_digest(known.encode(), key.encode()):
                found = tenant
        return found

    @classmethod
    def from_settings(cls, api_key: str | None, api_keys: str | None, api_keys_file: str | None) -> "Tenants":
        """Parse the three key settings; ValueError naming the setting and the problem."""
        keys: dict[str, str] = {}
        if api_key:
            _add(keys, DEFAULT_TENANT, api_key, "api_key")
        if api_keys:
            for i, group in enumerate(g for g in api_keys.split(";") if g.strip()):
                tenant, sep, listed = group.partition(":")
                if not sep:
                    raise ValueError(f"api_keys (TEOLA_API_KEYS) group {i}: expected 'tenant:key1,key2', got {group!r}")
                for key in listed.split(","):
                    _add(keys, tenant.strip(), key.strip(), "api_keys")
        if api_keys_file:
            path = Path(api_keys_file)
            try:
                data = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise ValueError(f"api_keys_file {str(path)!r}: cannot read a JSON object of tenant -> keys: {exc}") from None
            if not isinstance(data, dict):
                raise ValueError(f"api_keys_file {str(path)!r}: expected a JSON object {{tenant: [keys]}}")
            for tenant, listed in data.items():
                if not isinstance(listed, list) or not all(isinstance(k, str) for k in listed):
                    raise ValueError(f"api_keys_file: tenant {tenant!r} needs a list of key strings")
                for key in listed:
                    _add(keys, tenant, key, "api_keys_file")
        return cls(keys)


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


def cache_salt(tenant: str) -> str:
    """The vLLM prefix-cache salt of a tenant's prompts."""
    return hashlib.sha256(f"teola-tenant:{tenant}".encode()).hexdigest()[:32]
