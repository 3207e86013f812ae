"""The compose stack's HTTPS profile hangs together: Caddy sits in the `https` profile at the
one address the web process trusts for forwarded headers, inside the stack's subnet, and its
Caddyfile serves $DOMAIN by proxying to the web service."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import yaml

from app.settings import load_settings
from tests.support.infra import ROOT, base_env

_DEFAULT = re.compile(r"^\$\{[A-Z_]+:-(?P<value>[^}]+)\}$")


def _default(expression: str) -> str:
    """The fallback of a `${NAME:-fallback}` compose expression."""
    matched = _DEFAULT.match(expression)
    assert matched, expression
    return matched["value"]


def _compose() -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_the_proxy_is_optional_and_is_the_only_trusted_peer() -> None:
    compose = _compose()
    caddy = compose["services"]["caddy"]
    assert caddy["profiles"] == ["https"]
    assert {"80:80", "443:443"} <= set(caddy["ports"])
    for name in ("postgres", "redis", "web", "worker"):
        assert "profiles" not in compose["services"][name], name
    proxy_ip = _default(caddy["networks"]["default"]["ipv4_address"])
    trusted = _default(compose["services"]["web"]["environment"]["TRUSTED_PROXIES"])
    assert trusted == proxy_ip
    subnet = _default(compose["networks"]["default"]["ipam"]["config"][0]["subnet"])
    assert ipaddress.ip_address(proxy_ip) in ipaddress.ip_network(subnet)
    env = base_env("postgresql://postgres@127.0.0.1:5432/x", "redis://127.0.0.1:6379/1")
    assert load_settings({**env, "TRUSTED_PROXIES": trusted}).trusted_proxies == (proxy_ip,)


def test_the_caddyfile_serves_the_domain_through_the_web_service() -> None:
    caddy = _compose()["services"]["caddy"]
    assert "./deploy/Caddyfile:/etc/caddy/Caddyfile:ro" in caddy["volumes"]
    assert "DOMAIN" in caddy["environment"]
    lines = [
        line.strip()
        for line in (ROOT / "deploy" / "Caddyfile").read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    assert lines[0] == "{$DOMAIN} {"
    assert "reverse_proxy web:{$PORT:8000}" in lines
