"""The client's address behind a reverse proxy: :class:`ForwardedFor`, the one ASGI middleware that reads
``X-Forwarded-For`` (from ``RAGNAROK_TRUSTED_PROXIES`` only), for the API (:mod:`api.main`) and the arena
served alone (:mod:`webui.app`) alike."""

from __future__ import annotations

import ipaddress
from typing import Any

from starlette.responses import JSONResponse


def client_ip(host: str) -> str | None:
    """``host`` as an IP address (``1.2.3.4``, ``::1``; a port after it, ``1.2.3.4:80`` or ``[::1]:80``, is
    dropped), or None when it is none."""
    text = host.strip()
    if text.startswith("[") and "]" in text:
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


class ForwardedFor:
    """The client's address: uvicorn's ``ProxyHeadersMiddleware`` believes ``X-Forwarded-For`` from the trusted
    proxies only; an address taken from it that is not an IP address (``X-Forwarded-For: anything``) is a 400,
    so no client can be a new one at each request by sending a new string."""

    def __init__(self, app: Any, trusted_hosts: list[str] | str):
        from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware  # noqa: PLC0415

        self.app = app
        self.proxied = ProxyHeadersMiddleware(self._checked, trusted_hosts=trusted_hosts)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        scope["ragnarok.peer"] = scope.get("client")
        await self.proxied(scope, receive, send)

    async def _checked(self, scope: dict, receive: Any, send: Any) -> None:
        client = scope.get("client")
        if client and client != scope.get("ragnarok.peer"):  # rewritten from a trusted proxy's header
            host = client_ip(str(client[0]))
            if host is None:
                if scope["type"] == "http":
                    refusal = JSONResponse(
                        {"detail": "X-Forwarded-For from a trusted proxy must end in the client's IP address"},
                        status_code=400,
                    )
                    await refusal(scope, receive, send)
                else:  # a websocket: closed without being accepted
                    await send({"type": "websocket.close", "code": 1008})
                return
            scope["client"] = (host, client[1])
        await self.app(scope, receive, send)
