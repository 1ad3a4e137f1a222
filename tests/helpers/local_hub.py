"""A local stand-in for the Hugging Face hub, for tests that download models over HTTP without internet.

:class:`LocalHub` serves repositories made from saved model folders (``save_pretrained``, open_clip's
``open_clip_config.json`` + weights, ``SentenceTransformer.save``) through the endpoints the installed
``huggingface_hub`` calls:

* ``HEAD``/``GET /{repo}/resolve/{revision}/{path}``: small files answer 200 with ``X-Repo-Commit``,
  ``ETag`` (the git blob sha1) and ``Content-Length``; weight files (LFS on the real hub) answer 302 to
  a second "CDN" server with ``X-Linked-Etag`` (sha256) and ``X-Linked-Size``, as the hub does.
* ``GET /api/models/{repo}`` and ``/api/models/{repo}/revision/{revision}``: the repo info (``sha``,
  ``siblings``).
* ``GET /api/models/{repo}/tree/{revision}[/{path}]``: the file listing (``recursive`` honoured).

A missing repo, revision or file answers 404 with ``X-Error-Code`` ``RepoNotFound``,
``RevisionNotFound`` or ``EntryNotFound``, as the hub does. No ``X-Xet-Hash`` is ever sent, so every
download is a plain HTTP one, with ``Range`` requests for resumes. :meth:`LocalHub.break_file` makes
the server die mid-download of one file. Both servers run in daemon threads on 127.0.0.1 and are
shut down by :meth:`LocalHub.stop`, or by a finaliser when the hub object is collected or the
interpreter exits, so they never outlive a test session.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from folders import read_folder

#: Files the real hub stores with git LFS (and serves through a CDN redirect).
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".msgpack", ".onnx")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class Commit:
    """One commit of a repo: its sha and the bytes of every file, by path."""

    sha: str
    files: dict[str, bytes]


@dataclass
class Repo:
    """A hub repo: its commits (oldest first) and its refs (branches and tags) to commit shas."""

    commits: list[Commit] = field(default_factory=list)
    refs: dict[str, str] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        """The commit a branch, tag or full commit sha names, or None."""
        sha = self.refs.get(revision, revision)
        return next((c for c in self.commits if c.sha == sha), None)


@dataclass
class Fault:
    """Die while sending ``filename`` of ``repo``: after ``after_bytes`` bytes of the file, close the connection."""

    repo: str
    filename: str
    after_bytes: int
    stop: bool
    hits: int = 0


def git_blob_sha1(data: bytes) -> str:
    """The git object id of a file's bytes (what the hub sends as the ETag of non-LFS files)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(path: str) -> bool:
    return path.endswith(LFS_SUFFIXES)


class LocalHub:
    """Hub repos served over HTTP on 127.0.0.1 (see the module docstring).

    Examples
    --------
    >>> hub = LocalHub().start()                        # doctest: +SKIP
    >>> sha = hub.add_commit("org/clip", "/path/to/saved_model")
    >>> env = {"HF_ENDPOINT": hub.url}                  # for a subprocess that downloads from it
    >>> hub.stop()
    """

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.faults: list[Fault] = []
        #: ``(server, method, path)`` of every request, for tests that check what was asked.
        self.requests: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        self._servers: list[ThreadingHTTPServer] = []
        self._finalizer: weakref.finalize | None = None

    # -- content --------------------------------------------------------------------------------

    def add_commit(
        self,
        repo_id: str,
        files: str | Path | dict[str, bytes],
        *,
        tags: Iterable[str] = (),
        drop: Iterable[str] = (),
    ) -> str:
        """Commit a folder's files (or a ``{path: bytes}`` mapping) to ``repo_id``; ``main`` moves to it.

        ``drop`` leaves out files by path (e.g. ``config.json`` or the weights); ``tags`` point at the
        new commit. Returns the commit sha, made up from the repo, its parent and the content.
        """
        content = dict(files) if isinstance(files, dict) else read_folder(files)
        for path in drop:
            content.pop(path, None)
        with self._lock:
            repo = self.repos.setdefault(repo_id, Repo())
            parent = repo.commits[-1].sha if repo.commits else ""
            digest = hashlib.sha1(f"{repo_id}\0{parent}\0".encode())
            for path, data in sorted(content.items()):
                digest.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
            commit = Commit(digest.hexdigest(), content)
            repo.commits.append(commit)
            repo.refs["main"] = commit.sha
            for tag in tags:
                repo.refs[tag] = commit.sha
        return commit.sha

    def break_file(self, repo_id: str, filename: str, *, after_bytes: int = 1000, stop: bool = False) -> Fault:
        """Make every download of ``filename`` die after ``after_bytes`` bytes of it (headers claim the full size).

        A resumed download (``Range``) past that point gets the headers and no byte. With ``stop``
        the whole hub also stops serving right after the first broken download (connections are
        then refused). :meth:`heal` undoes it.
        """
        fault = Fault(repo_id, filename, after_bytes, stop)
        with self._lock:
            self.faults.append(fault)
        return fault

    def heal(self) -> None:
        """Serve every file whole again."""
        with self._lock:
            self.faults.clear()

    # -- running --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The endpoint to put in ``HF_ENDPOINT``."""
        return self._address(0)

    @property
    def cdn_url(self) -> str:
        return self._address(1)

    @property
    def running(self) -> bool:
        return bool(self._servers)

    def start(self) -> LocalHub:
        """Serve the hub and its CDN, each on a free port of 127.0.0.1, in daemon threads."""
        if self._servers:
            return self
        for role in ("hub", "cdn"):
            server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, role))
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, name=f"local-hub-{role}", daemon=True).start()
            self._servers.append(server)
        self._finalizer = weakref.finalize(self, _shutdown, list(self._servers))
        return self

    def stop(self) -> None:
        """Stop serving (new connections are refused); :meth:`start` serves again on new ports."""
        if self._finalizer is not None:
            self._finalizer()
        self._servers = []

    def __enter__(self) -> LocalHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def env(self) -> dict[str, str]:
        """Environment variables that point huggingface_hub at this hub, online."""
        return {"HF_ENDPOINT": self.url, "HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0", "HF_HUB_DISABLE_XET": "1"}

    def _address(self, index: int) -> str:
        if not self._servers:
            raise RuntimeError("the local hub is not running; call start()")
        host, port = self._servers[index].server_address[:2]
        return f"http://{host}:{port}"

    def _fault(self, repo_id: str, filename: str) -> Fault | None:
        with self._lock:
            return next((f for f in self.faults if (f.repo, f.filename) == (repo_id, filename)), None)

    def _stop_soon(self) -> None:
        """Stop from a request handler (shutdown() waits for the serving loop, so not in this thread)."""
        servers = list(self._servers)
        threading.Thread(target=_shutdown, args=(servers,), daemon=True).start()


def _shutdown(servers: list[ThreadingHTTPServer]) -> None:
    for server in servers:
        server.shutdown()
        server.server_close()


# -- the request handler -----------------------------------------------------------------------


def _handler(hub: LocalHub, role: str) -> type[BaseHTTPRequestHandler]:
    class Handler(_HubHandler):
        pass

    Handler.hub = weakref.proxy(hub)  # the serving threads must not keep the hub alive: its finaliser stops them
    Handler.role = role
    return Handler


class _HubHandler(BaseHTTPRequestHandler):
    """Answers like the hub (role ``hub``) or like its LFS CDN (role ``cdn``)."""

    protocol_version = "HTTP/1.1"
    hub: LocalHub
    role: str

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: requests are recorded in ``hub.requests`` instead."""

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _serve(self, body: bool) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        with self.hub._lock:
            self.hub.requests.append((self.role, self.command, path))
        if self.role == "cdn":
            self._cdn(url.path, body)
        elif path == "/api/agent-harnesses":  # huggingface_hub's telemetry registry: an empty one
            self._send_json({"standardEnvVars": [], "harnesses": {}}, {})
        elif path.startswith("/api/models/"):
            self._api(url.path[len("/api/models/") :], parse_qs(url.query))
        elif "/resolve/" in url.path:
            self._resolve(url.path, body)
        else:
            self._error(404, None, f"no such endpoint: {path}")

    # -- /{repo}/resolve/{revision}/{path} ------------------------------------------------------

    def _resolve(self, raw_path: str, body: bool) -> None:
        repo_part, _, rest = raw_path.lstrip("/").partition("/resolve/")
        revision, _, filename = rest.partition("/")
        found = self._lookup(unquote(repo_part), unquote(revision))
        if found is None:
            return
        repo_id, commit = found
        filename = unquote(filename)
        data = commit.files.get(filename)
        if data is None:
            self._error(404, "EntryNotFound", f"{filename} does not exist at {commit.sha}", commit=commit.sha)
            return
        if is_lfs(filename):
            location = f"{self.hub.cdn_url}/lfs/{commit.sha}/{quote(repo_id, safe='')}/{quote(filename)}"
            self._send_head(
                302,
                {
                    "Location": location,
                    "X-Repo-Commit": commit.sha,
                    "X-Linked-Etag": f'"{hashlib.sha256(data).hexdigest()}"',
                    "X-Linked-Size": str(len(data)),
                    "Content-Length": "0",
                },
            )
            return
        self._send_file(
            repo_id, filename, data, body, {"X-Repo-Commit": commit.sha, "ETag": f'"{git_blob_sha1(data)}"'}
        )

    def _cdn(self, raw_path: str, body: bool) -> None:
        """``/lfs/{commit}/{repo, slash encoded}/{path}``: the bytes of a weight file, as a CDN serves them."""
        parts = raw_path.lstrip("/").split("/")
        repo_id, filename = (unquote(parts[2]), unquote("/".join(parts[3:]))) if len(parts) > 3 else ("", "")
        repo = self.hub.repos.get(repo_id) if parts[0] == "lfs" else None
        commit = repo.resolve(parts[1]) if repo else None
        data = commit.files.get(filename) if commit else None
        if data is None:
            self._error(404, None, "no such blob")
            return
        self._send_file(repo_id, filename, data, body, {"ETag": f'"{hashlib.sha256(data).hexdigest()}"'})

    # -- /api/models/... ------------------------------------------------------------------------

    def _api(self, raw_rest: str, query: dict[str, list[str]]) -> None:
        if "/tree/" in raw_rest:
            repo_part, _, rest = raw_rest.partition("/tree/")
            revision, _, folder = rest.partition("/")
            found = self._lookup(unquote(repo_part), unquote(revision))
            if found is not None:
                recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
                self._tree(found[1], unquote(folder).strip("/"), recursive)
            return
        repo_part, _, revision = raw_rest.partition("/revision/")
        found = self._lookup(unquote(repo_part), unquote(revision) if revision else "main")
        if found is None:
            return
        repo_id, commit = found
        info = {
            "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
            "id": repo_id,
            "modelId": repo_id,
            "sha": commit.sha,
            "private": False,
            "disabled": False,
            "gated": False,
            "tags": [],
            "siblings": [{"rfilename": path} for path in sorted(commit.files)],
        }
        self._send_json(info, {"X-Repo-Commit": commit.sha})

    def _tree(self, commit: Commit, folder: str, recursive: bool) -> None:
        prefix = f"{folder}/" if folder else ""
        inside = sorted(p for p in commit.files if p.startswith(prefix))
        if folder and not inside:
            self._error(404, "EntryNotFound", f"{folder} does not exist at {commit.sha}", commit=commit.sha)
            return
        entries: list[dict[str, Any]] = []
        folders: set[str] = set()
        for path in inside:
            rel = path[len(prefix) :]
            dirs = rel.split("/")[:-1]
            for depth in range(1, len(dirs) + 1 if recursive else min(1, len(dirs)) + 1):
                sub = prefix + "/".join(dirs[:depth])
                if sub not in folders:
                    folders.add(sub)
                    entries.append({"type": "directory", "oid": hashlib.sha1(sub.encode()).hexdigest(), "path": sub})
            if dirs and not recursive:
                continue
            data = commit.files[path]
            entry: dict[str, Any] = {"type": "file", "oid": git_blob_sha1(data), "size": len(data), "path": path}
            if is_lfs(path):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            entries.append(entry)
        self._send_json(entries, {"X-Repo-Commit": commit.sha})

    # -- answers --------------------------------------------------------------------------------

    def _lookup(self, repo_id: str, revision: str) -> tuple[str, Commit] | None:
        """The repo and commit asked for, or None after answering the hub's 404."""
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", f"Repository not found: {repo_id}")
            return None
        commit = repo.resolve(revision)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
            return None
        return repo_id, commit

    def _send_head(self, status: int, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()

    def _error(self, status: int, code: str | None, message: str, commit: str | None = None) -> None:
        payload = json.dumps({"error": message}).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(payload)), "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        if commit:
            headers["X-Repo-Commit"] = commit
        self._send_head(status, headers)
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _send_json(self, value: Any, headers: dict[str, str]) -> None:
        payload = json.dumps(value).encode()
        self._send_head(200, {"Content-Type": "application/json", "Content-Length": str(len(payload)), **headers})
        self.wfile.write(payload)

    def _send_file(self, repo_id: str, filename: str, data: bytes, body: bool, headers: dict[str, str]) -> None:
        start, stop = _byte_range(self.headers.get("Range"), len(data))
        status = 206 if self.headers.get("Range") else 200
        extra = {"Content-Range": f"bytes {start}-{stop - 1}/{len(data)}"} if status == 206 else {}
        self._send_head(
            status,
            {
                **headers,
                **extra,
                "Content-Type": "application/octet-stream",
                "Content-Length": str(stop - start),
                "Accept-Ranges": "bytes",
            },
        )
        if not body:
            return
        fault = self.hub._fault(repo_id, filename)
        if fault is None:
            self.wfile.write(data[start:stop])
            return
        fault.hits += 1
        self.wfile.write(data[start : max(start, min(stop, fault.after_bytes))])
        self.wfile.flush()
        self.close_connection = True
        self.connection.close()
        if fault.stop:
            self.hub._stop_soon()


def _byte_range(header: str | None, size: int) -> tuple[int, int]:
    """``(start, stop)`` of a ``Range: bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` header (whole file without one)."""
    if not header or not header.startswith("bytes="):
        return 0, size
    first, _, last = header[len("bytes=") :].split(",")[0].strip().partition("-")
    if not first:
        return max(0, size - int(last)), size
    return min(int(first), size), min(int(last) + 1, size) if last else size
