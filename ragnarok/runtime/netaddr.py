"""Hosts and ports: loopback or not, a URL from a host and a port (an IPv6 host in brackets), and whether a
port can be bound before a server spends its start-up on it."""

from __future__ import annotations

import errno
import ipaddress
import socket


def bare_host(host: str) -> str:
    """``host`` without the brackets of an IPv6 literal (``[::1]`` -> ``::1``), as sockets take it."""
    host = host.strip()
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    host = bare_host(host).lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_host(host: str) -> str:
    """``host`` as it goes in a URL: an IPv6 literal in brackets (``::1`` -> ``[::1]``), anything else as is."""
    bare = bare_host(host)
    return f"[{bare}]" if ":" in bare else bare


def http_url(host: str, port: int, scheme: str = "http") -> str:
    """``http://HOST:PORT`` (``http://[::1]:8152`` for an IPv6 host)."""
    return f"{scheme}://{url_host(host)}:{port}"


def bind_error(host: str, port: int) -> str | None:
    """Why a server could not listen on ``host:port`` (every address ``host`` resolves to, as uvicorn binds
    them: ``SO_REUSEADDR``, IPv6 sockets v6-only), or None when it can; nothing stays bound."""
    if not 1 <= port <= 65535:  # getaddrinfo takes 99999 as 34463 (its low 16 bits): it would serve there
        return f"port {port} is not a TCP port: give one from 1 to 65535"
    bare = bare_host(host)
    try:
        infos = socket.getaddrinfo(bare or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        return f"cannot resolve {host!r}: {exc}"
    for family, kind, proto, _, address in dict.fromkeys(infos):
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                where = http_url(address[0], port).split("://", 1)[1]
                if exc.errno == errno.EADDRINUSE:
                    return (
                        f"port {port} is already in use on {where}: stop what listens there or pick another with --port"
                    )
                return f"cannot listen on {where}: {exc.strerror or exc}"
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``host`` now (the kernel's pick; free until someone binds it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
