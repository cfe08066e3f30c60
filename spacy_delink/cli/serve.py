"""`delink serve`: the attack and the protection as an HTTP service, with a page for reviewers."""
from __future__ import annotations

import logging
import socket
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer

from .app import app
from .linkage import KEY_FILE_OPTION, READINGS_HELP

def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: any free one); uvicorn starts listening on it."""
    from ..errors import InputError

    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as err:
        raise InputError(f"--host {host} --port {port}: cannot listen there ({err.strerror or err}); choose another port or host") from None
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@app.command("serve", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def serve_command(
    ctx: typer.Context,
    index: Path = typer.Argument(..., help="Index directory built by `delink index`."),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on; other than loopback only with an API key."),
    port: int = typer.Option(8080, "--port", help="Port to listen on (0: any free port, printed at start)."),
    k: int = typer.Option(2, "--k", help="Protection every request gets at least: linkable when fewer than k documents match."),
    arity: int = typer.Option(3, "--arity", help="... and combinations of up to this many phrases (1-3)."),
    readings: str = typer.Option("exact,search,gap", "--readings", help=READINGS_HELP),
    allow_weaker: bool = typer.Option(False, "--allow-weaker", help="Let requests ask for a smaller k or arity than --k and --arity."),
    config: Optional[Path] = typer.Option(None, "--config", help="spaCy config with a delink_rewriter component, e.g. openai [default: the offline Mask model]."),
    settings: Optional[list[str]] = typer.Option(None, "--set", metavar="SECTION.KEY=VALUE", help="Set a value of the --config (repeatable), as for `delink protect`."),
    flagging: Optional[str] = typer.Option(None, "--flagging", help="What to rewrite: shortest, min_cover or optimal [default: min_cover, or the config's]."),
    key_file: Optional[Path] = KEY_FILE_OPTION,
    api_key_file: Optional[Path] = typer.Option(
        None, "--api-key-file", help="File holding the API key clients must send as Authorization: Bearer <key> [also $DELINK_API_KEY_FILE, or the key in $DELINK_API_KEY]."
    ),
    workers: int = typer.Option(0, "--workers", help="Requests worked on at once [default 0: one per CPU]."),
    queue: Optional[int] = typer.Option(None, "--queue", help="Requests that may wait beyond those; more get 429 [default: 4 per worker]."),
    worker_nice: int = typer.Option(
        10, "--worker-nice", help="Nice steps the workers run below the event loop (Linux), so answers and refusals never wait behind them; 0: level."
    ),
    max_body_bytes: int = typer.Option(8 * 1024 * 1024, "--max-body-bytes", help="Largest request body; larger ones get 413."),
    max_texts: int = typer.Option(64, "--max-texts", help="Most texts in one request; more get 413."),
    max_chars: int = typer.Option(200_000, "--max-chars", help="Longest text, in characters; longer ones get 413."),
    deadline: float = typer.Option(60.0, "--deadline", help="Seconds from a request's arrival to its answer, waiting included; later ones get 503."),
    body_timeout: float = typer.Option(10.0, "--body-timeout", help="Seconds from a request's arrival to the end of its body; later ones get 408."),
    max_per_client: Optional[int] = typer.Option(
        None, "--max-per-client", help="Requests one client address may have in the server at once; more get 429 [default: half of --workers + --queue]."
    ),
    llm_batch_size: int = typer.Option(16, "--llm-batch-size", help="With an LLM config: documents of concurrent protect requests rewritten together."),
    max_combinations: int = typer.Option(1000, "--max-combinations", help="Combinations listed per assess record (scores stay exact)."),
    cors_origins: Optional[list[str]] = typer.Option(None, "--cors-origin", help="Origin whose pages may call the API (repeatable; default: none, CORS off)."),
    allowed_hosts: Optional[list[str]] = typer.Option(
        None, "--allowed-host", help="Host header name clients may use besides the loopback ones and --host (repeatable; *.example.org; * for any)."
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error (log lines hold ids and sizes, never texts)."),
) -> None:
    """Serve assess and protect over HTTP, with a page for reviewers at / (docs/serve.md)."""
    from ..extras import require_extra
    from ..linkage.readings import check_readings, describe
    from .protect import config_overrides

    require_extra("serve", "delink serve")
    import uvicorn

    from ..serve.app import create_app
    from ..serve.auth import is_loopback, load_api_key
    from ..serve.protocol import JsonErrorsHttpTools
    from ..serve.service import Service
    from ..serve.settings import ServeSettings
    from ..serve.warmup import warm_up_index, warm_up_kernels

    level = getattr(logging, log_level.upper(), None)
    if not isinstance(level, int):
        raise typer.BadParameter(f"{log_level!r} is not one of debug, info, warning, error", param_hint="--log-level")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    serve_settings = ServeSettings(
        index=index, key_file=key_file, host=host, port=port, k=k, arity=arity, allow_weaker=allow_weaker, readings=check_readings(readings), config=config,
        config_overrides=config_overrides(ctx, settings or []), flagging=flagging, max_combinations=max_combinations,
        workers=workers, queue=queue, worker_nice=worker_nice, max_body_bytes=max_body_bytes, max_texts=max_texts, max_chars=max_chars,
        deadline=deadline, body_timeout=body_timeout, max_per_client=max_per_client, llm_batch_size=llm_batch_size,
        cors_origins=tuple(cors_origins or ()), allowed_hosts=tuple(allowed_hosts or ()), api_key=load_api_key(api_key_file),
    )
    started = time.perf_counter()
    service = Service(serve_settings)
    try:
        warm_up_kernels(service.index.rules, serve_settings.flagging)
        warm_up_index(service.index, serve_settings.k)
        service.ready = True
        typer.echo(f"note: index opened and kernels compiled in {time.perf_counter() - started:.1f} s", err=True)
        sock = _listen(host, port)
        url = _url(sock)

        class Server(uvicorn.Server):
            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets)
                if self.started:  # listening: say where, and on what terms
                    llm = " (LLM calls batched across requests)" if service.uses_llm else ""
                    typer.echo(
                        f"serving {index} on {url}: k >= {k}, arity >= {arity}{'' if not allow_weaker else ' (weaker allowed)'}, "
                        f"{describe(serve_settings.readings)}, "
                        f"{serve_settings.worker_count} workers, {serve_settings.capacity} requests at most{llm}",
                        err=True,
                    )
                    if not is_loopback(host) and not allowed_hosts:
                        typer.echo(
                            f"note: requests are answered for the Host names {', '.join(serve_settings.trusted_hosts)} only; "
                            "add --allowed-host NAME for each name clients use to reach this server", err=True,
                        )
                    if serve_settings.api_key is None:
                        typer.echo(
                            "note: no API key ($DELINK_API_KEY or --api-key-file): listening on the loopback interface only, "
                            "and anyone on this machine can call it", err=True,
                        )

        server = Server(uvicorn.Config(
            create_app(service), log_level=level, access_log=False, timeout_graceful_shutdown=max(1, int(deadline)),
            server_header=False, http=JsonErrorsHttpTools,
        ))
        server.run(sockets=[sock])
    finally:
        service.close()
