"""The cluster's nginx configuration (:mod:`ragnarok.deploy.cluster`): one file, everything under its prefix.

The decision it writes down is which requests nginx may send to another instance after one failed: reads
that spend and record nothing are retried; an instance's own answer (502 and 503 too) is the client's; and
requests that may call a paid backend, spend a budget or record a vote are never retried once sent. When no
instance can be reached nginx answers a JSON 503 with ``Retry-After``.

Design notes: docs/internals/deploy.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

#: The cookie nginx sets to keep an arena visitor on one instance (Gradio's sessions live in one process).
AFFINITY_COOKIE = "ragnarok_affinity"
#: Routes whose POSTs are safe to send again to another instance (they read, spend nothing, record nothing).
RETRIED_POSTS = ("/v1/retrieve", "/v1/segments")

TEMPLATE = """\
# Written by `deploy/cluster up` ({instances} instances of `ragnarok serve`); rewritten on every `up`.
# Which requests may go to another instance after a failure (ragnarok/deploy/nginx.py, docs/deploying.md
# "Several instances behind a proxy"): GET/HEAD and POST {retried} are retried after being sent (they read an index,
# spend nothing, record nothing); /rag, /v1/generate, /v1/write, /v1/evaluate, /v1/rerank (it may name an LLM
# reranker) and the arena's POSTs (battles, votes) never are once sent: a second try could call a paid backend
# twice, spend a key's budget twice or record a vote twice. nginx sends a non-idempotent request to another
# instance only when the first could not be reached at all (the instance never saw it).
{user}worker_processes 1;
pid {prefix}/nginx.pid;
error_log {logs}/nginx.log warn;
events {{ worker_connections 4096; }}

http {{
    # which instance answered each request, |-separated ($upstream_addr: "A, B" when nginx tried a second one)
    log_format upstreams '$time_iso8601|$status|$request_method|$uri|$upstream_addr|$upstream_status|'
                         '$request_time|$cookie_{cookie}';
    access_log {logs}/nginx.access.log upstreams buffer=32k flush=1s;
    server_tokens off;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    # the service refuses a body over RAGNAROK_MAX_BODY_BYTES with its own 413; nginx lets that much through
    client_max_body_size {max_body};
    client_body_buffer_size 1m;

    # session affinity for the arena: the visitor's cookie, else this request's id (set as the cookie below)
    map $cookie_{cookie} $affinity {{ "" $request_id; default $cookie_{cookie}; }}
    map $cookie_{cookie} $affinity_cookie {{ "" "{cookie}=$request_id; Path=/; HttpOnly; SameSite=Lax"; default ""; }}
    map $http_upgrade $connection_upgrade {{ default upgrade; "" ""; }}

    # passive health checks: an instance that fails once (refused, reset, timed out: never an answer of its
    # own, a 503 included) gets no request for {fail_timeout}; GET /readyz says whether one can serve now
    upstream ragnarok {{
{servers}
        keepalive 64;
    }}
    upstream ragnarok_arena {{
        hash $affinity consistent;
{servers}
        keepalive 16;
    }}

    server {{
        listen {listen};
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $http_host;
        # nginx is the edge: the instances (RAGNAROK_TRUSTED_PROXIES=127.0.0.1) count the peer nginx saw,
        # never an address a client wrote itself
        proxy_set_header X-Forwarded-For $remote_addr;
        proxy_set_header X-Forwarded-Proto $scheme;
        proxy_buffering off;          # Server-Sent Events (streamed answers, Gradio's queue) pass at once
        proxy_connect_timeout 2s;
        proxy_read_timeout {read_timeout}s;   # RAGNAROK_GATEWAY_TIMEOUT_S and a margin
        proxy_send_timeout 60s;
        proxy_next_upstream error timeout;     # non-idempotent requests: only when never sent (see above)
        proxy_next_upstream_tries {instances};
        # no instance reachable: a JSON 503 with Retry-After, not nginx's HTML page (the instances' own 502s
        # and 503s pass as they are: proxy_intercept_errors is off)
        error_page 502 504 = @unreachable;
        location @unreachable {{
            default_type application/json;
            add_header Retry-After 2 always;
            return 503 '{{"detail": "no instance of the service could be reached: try again shortly"}}';
        }}

        location / {{
            proxy_pass http://ragnarok;
        }}
{retried_locations}
        location ~ ^/v1/[^/]+/search$ {{
            proxy_pass http://ragnarok;
        }}
        location ~ ^/(rag|v1/generate|v1/write|v1/evaluate|v1/rerank)$ {{
            proxy_pass http://ragnarok;
        }}
        location /arena {{
            add_header Set-Cookie $affinity_cookie;
            # a location that sets a header sets them all (nginx inherits none of the server's then)
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $remote_addr;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_read_timeout 3600s;          # a visitor's stream stays open while a battle runs
            proxy_pass http://ragnarok_arena;
        }}
    }}
}}
"""

RETRIED_LOCATION = """\
        location = {path} {{
            proxy_next_upstream error timeout non_idempotent;
            proxy_pass http://ragnarok;
        }}
"""


def render(
    prefix: Path,
    logs: Path,
    listen: str,
    instance_ports: Sequence[int],
    max_body_bytes: int,
    read_timeout_s: float,
    user: str | None = None,
    fail_timeout_s: int = 3,
) -> str:
    """nginx.conf for instances on 127.0.0.1:``instance_ports``, listening on ``listen`` (``HOST:PORT``);
    ``user``: the workers' user when nginx starts as root (they write the temporary files under ``prefix``)."""
    servers = "\n".join(
        f"        server 127.0.0.1:{port} max_fails=1 fail_timeout={fail_timeout_s}s;" for port in instance_ports
    )
    return TEMPLATE.format(
        instances=len(instance_ports),
        retried=", ".join(RETRIED_POSTS),
        user=f"user {user};\n" if user else "",
        prefix=prefix,
        logs=logs,
        max_body=max_body_bytes,
        cookie=AFFINITY_COOKIE,
        fail_timeout=f"{fail_timeout_s}s",
        servers=servers,
        listen=listen,
        read_timeout=int(read_timeout_s) + 30,
        retried_locations="".join(RETRIED_LOCATION.format(path=path) for path in RETRIED_POSTS),
    )


def temp_dirs(prefix: Path) -> list[Path]:
    """The temporary directories the configuration names (made before nginx starts)."""
    return [prefix / "tmp" / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")]
