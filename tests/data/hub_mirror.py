"""A local stand-in for the Hugging Face Hub's file endpoints, for ``mindrl data fetch`` tests.

It serves what ``huggingface_hub.hf_hub_download`` asks for, from memory:
``HEAD|GET /datasets/OWNER/NAME/resolve/REVISION/PATH`` with ``X-Repo-Commit``, an ``ETag``
that is the file's SHA-256 (as for files in LFS storage), ``Content-Length`` and byte ranges
(``Range: bytes=N-`` -> 206). ``cut_once`` names files whose first GET announces the full length
and then stops halfway (a dropped connection); ``etags`` overrides a file's ETag. Every request
is logged as ``(method, path, Range header)``.
"""

from __future__ import annotations

import hashlib
import http.server
import re
import threading
from typing import Dict, List, Optional, Set, Tuple

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class HubMirror:
    def __init__(self, files: Dict[Tuple[str, str], bytes]):
        self.files = files
        self.cut_once: Set[str] = set()
        self.etags: Dict[str, str] = {}
        self.log: List[Tuple[str, str, Optional[str]]] = []
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _file(self):
                m = re.fullmatch(r"/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", self.path)
                if not m or (m.group(1), m.group(3)) not in mirror.files:
                    return None, None
                return m.group(3), mirror.files[(m.group(1), m.group(3))]

            def _head(self, path, body, status=200, start=0):
                self.send_response(status)
                self.send_header("X-Repo-Commit", COMMIT)
                etag = mirror.etags.get(path, hashlib.sha256(body).hexdigest())
                self.send_header("ETag", f'"{etag}"')
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(len(body) - start))
                if status == 206:
                    self.send_header("Content-Range",
                                     f"bytes {start}-{len(body) - 1}/{len(body)}")
                self.end_headers()

            def do_HEAD(self):
                mirror.log.append(("HEAD", self.path, None))
                path, body = self._file()
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self._head(path, body)

            def do_GET(self):
                rng = self.headers.get("Range")
                mirror.log.append(("GET", self.path, rng))
                path, body = self._file()
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = int(re.match(r"bytes=(\d+)-", rng).group(1)) if rng else 0
                self._head(path, body, 206 if start else 200, start)
                if path in mirror.cut_once:
                    mirror.cut_once.discard(path)
                    self.wfile.write(body[:len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body[start:])

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def gets(self, suffix: str = "") -> List[Tuple[str, str, Optional[str]]]:
        return [e for e in self.log if e[0] == "GET" and e[1].endswith(suffix)]
