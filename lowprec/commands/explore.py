"""``lowprec explore``: write (and optionally serve) the format explorer page."""

from __future__ import annotations

import argparse
import functools
import http.server
from pathlib import Path

from ._common import add_command


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "explore", help="write a self-contained HTML format explorer (bits, rounding, MX)",
        description="Write one offline HTML page that explores every format of 16 bits or "
        "fewer: clickable bits, value, class and neighbours of a code; a number rounded in "
        "all seven modes with its error in ulps; an MX/NVFP4 block panel. Every value is "
        "computed by lowprec and embedded. The state is in the URL (?format=fp8_e4m3&value=0.1).",
        examples=[
            'lowprec explore                                  # writes ./explorer.html; open it',
            'lowprec explore --out slides/fp8.html --format e4m5 --format e5m6',
            'lowprec explore --serve --port 8000              # http://127.0.0.1:8000/explorer.html',
            "open 'explorer.html?format=fp8_e4m3&value=0.1'   # a state to link from a slide",
        ])
    p.add_argument("--out", default="explorer.html", metavar="FILE", help="the page to write")
    p.add_argument("--format", action="append", default=[], metavar="FORMAT", dest="formats",
                   help="also show this custom format, eXmY (e4m5, e5m6: IEEE-style); repeat")
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")
    p.add_argument("--serve", action="store_true",
                   help="after writing, serve the page's folder on 127.0.0.1 (Ctrl-C stops)")
    p.add_argument("--port", type=int, default=8000, help="port for --serve")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..explorer import parse_format_spec, write_page

    extra = [parse_format_spec(spec) for spec in args.formats]  # bad names fail first
    if not 0 < args.port < 65536:
        raise ValueError(f"--port {args.port}: give a port number 1..65535")
    path = write_page(args.out, extra, force=args.force)
    size = path.stat().st_size
    print(f"wrote {path} ({size / 1024:.0f} KiB); open it in a browser, e.g. "
          f"{path.resolve().as_uri()}?format=fp8_e4m3&value=0.1")
    if args.serve:
        serve(path, args.port)
    return 0


def serve(path: Path, port: int) -> None:
    """Serve the folder holding ``path`` on 127.0.0.1 until interrupted."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(path.resolve().parent))
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        raise ValueError(f"--port {port}: cannot listen there ({exc.strerror})") from None
    print(f"serving http://127.0.0.1:{port}/{path.name} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.server_close()
