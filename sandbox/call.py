"""One Graph API request, parsed once: version prefix, path segments, parameters, token.

Meta accepts parameters in the query string, as form fields or in a JSON body, and the token
as ``Authorization: Bearer`` or ``access_token``; this is the one place that knows that.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from litestar import Request

from sandbox.errors import GraphError, invalid_param, unsupported
from sandbox.models import Account, Token
from sandbox.runtime import Sandbox
from sandbox.tokens import authenticate

_VERSION = re.compile(r"v\d+\.\d+")


@dataclass(slots=True)
class GraphCall:
    sandbox: Sandbox
    request: Request[Any, Any, Any]
    method: str
    version: str  # "/v25.0" or "" when the caller used no version
    segments: list[str]
    query: dict[str, str]
    form: dict[str, str]
    json_body: Any
    _token: Token | None = None

    @classmethod
    async def build(cls, sandbox: Sandbox, request: Request[Any, Any, Any], path: str) -> GraphCall:
        segments = [part for part in path.split("/") if part]
        version = ""
        if segments and _VERSION.fullmatch(segments[0]):
            version = "/" + segments.pop(0)
        query = dict(
            parse_qsl(request.scope["query_string"].decode("latin-1"), keep_blank_values=True)
        )
        form: dict[str, str] = {}
        json_body: Any = None
        body = await request.body()
        content_type = request.headers.get("content-type", "").lower()
        if body:
            if "application/x-www-form-urlencoded" in content_type:
                form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
            elif "multipart/form-data" in content_type:
                parsed = await request.form()
                form = {k: v for k, v in parsed.items() if isinstance(v, str)}
            else:
                try:
                    json_body = json.loads(body)
                except ValueError:
                    if "json" in content_type:
                        raise invalid_param("The request body is not valid JSON") from None
        return cls(
            sandbox, request, request.method.upper(), version, segments, query, form, json_body
        )

    def param(self, name: str) -> str | None:
        """A scalar parameter from the form, the query or the JSON body, in that order."""
        if name in self.form:
            return self.form[name]
        if name in self.query:
            return self.query[name]
        if isinstance(self.json_body, dict) and name in self.json_body:
            value = self.json_body[name]
            return value if isinstance(value, str) else json.dumps(value)
        return None

    def structured(self, name: str) -> Any:
        """An object parameter: straight from a JSON body, or a JSON string in form/query."""
        if isinstance(self.json_body, dict) and name in self.json_body:
            return self.json_body[name]
        raw = self.form.get(name, self.query.get(name))
        if raw is None:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise invalid_param(f"param {name} must be a JSON object") from None

    @property
    def path(self) -> str:
        return self.version + "/" + "/".join(self.segments)

    @property
    def base_url(self) -> str:
        return self.sandbox.config.public_url + self.path

    def token(self) -> Token:
        if self._token is None:
            header = self.request.headers.get("authorization", "")
            scheme, _, value = header.partition(" ")
            raw = value.strip() if scheme.lower() in ("bearer", "oauth") else None
            self._token = authenticate(self.sandbox.world, raw or self.param("access_token"))
        return self._token

    def account(self) -> Account:
        return self.sandbox.world.accounts[self.token().account_id]

    def own_account(self, node_id: str) -> Account:
        """The token's account when ``node_id`` names it ("me", its id or app-scoped id)."""
        account = self.account()
        if node_id in ("me", account.user_id, account.app_scoped_id):
            return account
        raise unsupported(self.method, node_id)

    def now(self) -> float:
        return self.sandbox.clock.now()


def unsupported_method(call: GraphCall) -> GraphError:
    return GraphError(f"Unsupported request - method type: {call.method.lower()}", 100)
