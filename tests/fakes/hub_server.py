"""A loopback server that speaks the Hugging Face Hub's HTTP API, for tests of publishing and reading datasets.

It holds dataset repos in memory (file contents in a folder on disk) and answers what ``huggingface_hub``'s
``HfApi`` and ``datasets.load_dataset`` send: ``whoami-v2``, repo creation (public or private), repo info per
revision, ``preupload`` (Parquet files go through git-lfs, the rest inline), the git-lfs batch API with
basic uploads, the NDJSON ``commit`` endpoint (applied whole or not at all, on a branch or as a pull request
``refs/pr/N``), ``tree`` and ``paths-info``, ``refs``, branches, ``commits``, ``validate-yaml`` and ``resolve`` with the
``X-Repo-Commit`` and ``ETag`` headers downloads need. Tokens map to a user and a role (``read`` or
``write``); a private repo is invisible (404 ``RepoNotFound``) to anyone but its owner. Every request's
method, path and headers are kept in :attr:`FakeHub.requests` so tests can check what was sent.

Tests hold uploads with :meth:`FakeHub.hold_uploads` to kill a client in the middle of one.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import yaml

LFS_SUFFIXES = (".parquet", ".arrow", ".bin", ".png", ".jpg", ".zip")
"""Paths the server asks to be uploaded through git-lfs (the Hub's default ``.gitattributes`` patterns)."""


def git_blob_oid(data: bytes) -> str:
    """The git object id of a blob holding ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The git-lfs pointer file that stands for content ``sha256`` of ``size`` bytes."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


@dataclass(frozen=True)
class StoredFile:
    """A file of a commit: its git blob id, size and, for an LFS file, the sha256 of its content."""

    blob: str
    size: int
    sha256: str | None = None


@dataclass
class Commit:
    oid: str
    parent: str | None
    files: dict[str, StoredFile]
    title: str
    message: str
    author: str
    date: str


@dataclass
class Repo:
    repo_id: str
    owner: str
    private: bool
    refs: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)
    pull_requests: list[int] = field(default_factory=list)


class HubError(Exception):
    """An HTTP error answer: status, ``X-Error-Code`` and message."""

    def __init__(self, status: int, code: str | None, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class FakeHub:
    """The server's state and its HTTP server; ``url`` is the endpoint to give as ``HF_ENDPOINT``."""

    def __init__(self, tokens: dict[str, tuple[str, str]], storage: Path | None = None) -> None:
        self.tokens = dict(tokens)
        self._temporary = None if storage else tempfile.TemporaryDirectory()
        self.storage = Path(storage or self._temporary.name)
        self.storage.mkdir(parents=True, exist_ok=True)
        self.repos: dict[str, Repo] = {}
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.RLock()
        self.upload_started = threading.Event()
        self._uploads_released = threading.Event()
        self._uploads_released.set()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeHub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._uploads_released.set()
        self._server.shutdown()
        self._server.server_close()
        if self._temporary is not None:
            self._temporary.cleanup()

    # -- what tests look at --------------------------------------------------------------------------------------

    def hold_uploads(self) -> None:
        """Make every git-lfs upload wait (after :attr:`upload_started` is set) until :meth:`release_uploads`."""
        self.upload_started.clear()
        self._uploads_released.clear()

    def release_uploads(self) -> None:
        self._uploads_released.set()

    def head(self, repo_id: str, revision: str = "main") -> str | None:
        """The commit ``revision`` of ``repo_id`` points at (None when there is no such repo or revision)."""
        repo = self.repos.get(repo_id)
        return None if repo is None else repo.refs.get(revision)

    def history(self, repo_id: str, revision: str = "main") -> list[Commit]:
        """The commits of ``revision``, newest first."""
        repo = self.repos[repo_id]
        oid, commits = repo.refs.get(revision), []
        while oid is not None:
            commits.append(repo.commits[oid])
            oid = repo.commits[oid].parent
        return commits

    def read(self, repo_id: str, path: str, revision: str = "main") -> bytes:
        """The content of ``path`` at ``revision``."""
        repo = self.repos[repo_id]
        return self._content(repo.commits[repo.refs[revision]].files[path])

    def blob_files(self) -> Iterator[Path]:
        """Every file the server stored."""
        return (path for path in self.storage.rglob("*") if path.is_file())

    # -- state -----------------------------------------------------------------------------------------------------

    def _blob_path(self, key: str) -> Path:
        return self.storage / key[:2] / key

    def _content(self, stored: StoredFile) -> bytes:
        return self._blob_path(stored.sha256 or stored.blob).read_bytes()

    def _user(self, headers: Any) -> tuple[str, str] | None:
        authorization = headers.get("Authorization") or ""
        token = authorization.removeprefix("Bearer ").strip()
        if not token:
            return None
        if token not in self.tokens:
            raise HubError(401, None, "Invalid credentials in Authorization header")
        return self.tokens[token]

    def _repo(self, repo_id: str, user: tuple[str, str] | None) -> Repo:
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and (user is None or user[0] != repo.owner)):
            raise HubError(
                401 if user is None else 404, "RepoNotFound", f"Repository Not Found for url: {repo_id}."
            )
        return repo

    def _writable(self, repo_id: str, user: tuple[str, str] | None) -> Repo:
        repo = self._repo(repo_id, user)
        if user is None or user[1] != "write" or user[0] != repo.owner:
            raise HubError(403, None, f"You don't have the rights to write to {repo_id}.")
        return repo

    def _commit_of(self, repo: Repo, revision: str) -> Commit:
        revision = unquote(revision)
        oid = repo.refs.get(revision, revision if revision in repo.commits else None)
        if oid is None:
            raise HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return repo.commits[oid]

    def create_repo(self, user: tuple[str, str] | None, body: dict) -> dict:
        if user is None or user[1] != "write":
            raise HubError(401 if user is None else 403, None, "You need a write token to create a repo.")
        owner = body.get("organization") or user[0]
        if owner != user[0]:
            raise HubError(403, None, f"You don't have the rights to create a dataset under {owner}.")
        repo_id = f"{owner}/{body['name']}"
        with self.lock:
            if repo_id in self.repos:
                raise HubError(409, None, "You already created this dataset repo")
            repo = Repo(repo_id, owner, body.get("visibility") == "private" or bool(body.get("private")))
            first = Commit(
                _new_oid(repo_id), None, {}, "initial commit", "", owner, _now()
            )  # the Hub starts a repo with a .gitattributes commit
            attributes = "".join(
                f"*{suffix} filter=lfs diff=lfs merge=lfs -text\n" for suffix in LFS_SUFFIXES
            )
            first.files[".gitattributes"] = self._store_regular(attributes.encode())
            repo.commits[first.oid], repo.refs["main"] = first, first.oid
            self.repos[repo_id] = repo
        return {"url": f"{self.url}/datasets/{repo_id}", "name": repo_id}

    def _store_regular(self, data: bytes) -> StoredFile:
        oid = git_blob_oid(data)
        path = self._blob_path(oid)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return StoredFile(oid, len(data))

    def commit(self, repo: Repo, revision: str, lines: list[dict], create_pr: bool, author: str) -> dict:
        header = next((line["value"] for line in lines if line["key"] == "header"), {})
        with self.lock:
            base = self._commit_of(repo, revision)
            if header.get("parentCommit") and header["parentCommit"] != base.oid and not create_pr:
                raise HubError(412, None, "A commit has happened since. Please refresh and try again.")
            files = dict(base.files)
            for line in lines:
                key, value = line["key"], line["value"]
                if key == "file":
                    files[value["path"]] = self._store_regular(base64.b64decode(value["content"]))
                elif key == "lfsFile":
                    stored = self._blob_path(value["oid"])
                    if not stored.is_file():
                        raise HubError(400, None, f"LFS file {value['path']} was never uploaded")
                    size = stored.stat().st_size
                    files[value["path"]] = StoredFile(
                        git_blob_oid(lfs_pointer(value["oid"], size)), size, value["oid"]
                    )
                elif key == "deletedFile":
                    if value["path"] not in files:
                        raise HubError(404, "EntryNotFound", "A file with this name doesn't exist")
                    del files[value["path"]]
                elif key == "deletedFolder":
                    prefix = value["path"].rstrip("/") + "/"
                    for path in [path for path in files if path.startswith(prefix)]:
                        del files[path]
            commit = Commit(
                _new_oid(repo.repo_id),
                base.oid,
                files,
                header.get("summary", ""),
                header.get("description", ""),
                author,
                _now(),
            )
            repo.commits[commit.oid] = commit
            pull_request = None
            if create_pr:
                pull_request = len(repo.pull_requests) + 1
                repo.pull_requests.append(pull_request)
                repo.refs[f"refs/pr/{pull_request}"] = commit.oid
            else:
                repo.refs[unquote(revision)] = commit.oid
        prefix = f"{self.url}/datasets/{repo.repo_id}"
        return {
            "commitUrl": f"{prefix}/commit/{commit.oid}",
            "commitOid": commit.oid,
            "pullRequestUrl": f"{prefix}/discussions/{pull_request}" if pull_request else None,
        }

    def entries(self, commit: Commit, path: str, recursive: bool) -> list[dict]:
        prefix = path.strip("/") + "/" if path.strip("/") else ""
        found: dict[str, dict] = {}
        for name, stored in sorted(commit.files.items()):
            if not name.startswith(prefix):
                continue
            rest = name[len(prefix) :].split("/")
            for depth in range(1, len(rest)):
                folder = prefix + "/".join(rest[:depth])
                if (recursive or depth == 1) and folder not in found:
                    found[folder] = _folder_entry(folder)
            if recursive or len(rest) == 1:
                found[name] = _file_entry(name, stored, commit)
        return list(found.values())


def _file_entry(path: str, stored: StoredFile, commit: Commit) -> dict:
    entry: dict[str, Any] = {"type": "file", "oid": stored.blob, "size": stored.size, "path": path}
    if stored.sha256:
        pointer = len(lfs_pointer(stored.sha256, stored.size))
        entry["lfs"] = {"oid": stored.sha256, "size": stored.size, "pointerSize": pointer}
    entry["lastCommit"] = {"id": commit.oid, "title": commit.title, "date": commit.date}
    return entry


def _folder_entry(path: str) -> dict:
    return {"type": "directory", "oid": hashlib.sha1(path.encode()).hexdigest(), "size": 0, "path": path}


def _new_oid(repo_id: str) -> str:
    return hashlib.sha1(f"{repo_id}{time.time_ns()}{threading.get_ident()}".encode()).hexdigest()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


_REPO = r"(?P<repo>[^/]+/[^/]+?)"
_ROUTES = [
    ("GET", re.compile(r"^/api/whoami-v2$"), "whoami"),
    ("POST", re.compile(r"^/api/repos/create$"), "create"),
    ("POST", re.compile(r"^/api/validate-yaml$"), "validate_yaml"),
    ("GET", re.compile(rf"^/api/datasets/{_REPO}(?:/revision/(?P<rev>[^/]+))?$"), "info"),
    ("POST", re.compile(rf"^/api/datasets/{_REPO}/preupload/(?P<rev>[^/]+)$"), "preupload"),
    ("POST", re.compile(rf"^/api/datasets/{_REPO}/commit/(?P<rev>[^/]+)$"), "commit"),
    ("GET", re.compile(rf"^/api/datasets/{_REPO}/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$"), "tree"),
    ("POST", re.compile(rf"^/api/datasets/{_REPO}/paths-info/(?P<rev>[^/]+)$"), "paths_info"),
    ("GET", re.compile(rf"^/api/datasets/{_REPO}/refs$"), "refs"),
    ("POST", re.compile(rf"^/api/datasets/{_REPO}/branch/(?P<branch>[^/]+)$"), "branch"),
    ("GET", re.compile(rf"^/api/datasets/{_REPO}/commits/(?P<rev>[^/]+)$"), "commits"),
    ("POST", re.compile(rf"^/datasets/{_REPO}\.git/info/lfs/objects/batch$"), "lfs_batch"),
    ("PUT", re.compile(r"^/lfs-upload/(?P<oid>[0-9a-f]{64})$"), "lfs_put"),
    ("GET", re.compile(rf"^/datasets/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"), "resolve"),
    ("HEAD", re.compile(rf"^/datasets/{_REPO}/resolve/(?P<rev>[^/]+)/(?P<path>.+)$"), "resolve"),
]


class HubHandler(BaseHTTPRequestHandler):
    """Answers one request against :attr:`hub` (set by :func:`_handler_for`)."""

    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        self.hub.requests.append({"method": method, "path": url.path, "headers": dict(self.headers.items())})
        self._request_body = self._read_body()  # read whole, so an error answer leaves the connection usable
        try:
            for route_method, pattern, name in _ROUTES:
                match = pattern.match(url.path)
                if route_method == method and match:
                    user = self.hub._user(self.headers)
                    getattr(self, f"_{name}")(user, match.groupdict(), parse_qs(url.query))
                    return
            raise HubError(404, None, f"no route for {method} {url.path}")
        except HubError as error:
            self._send_json(
                {"error": error.message}, error.status, {"X-Error-Code": error.code} if error.code else {}
            )

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    # -- plumbing ----------------------------------------------------------------------------------------

    def _body(self) -> bytes:
        return self._request_body

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send_json(self, payload: Any, status: int = 200, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    # -- routes -----------------------------------------------------------------------------------------

    def _whoami(self, user, match, query) -> None:
        if user is None:
            raise HubError(401, None, "Invalid username or password.")
        self._send_json(
            {
                "type": "user",
                "name": user[0],
                "orgs": [],
                "auth": {"type": "access_token", "accessToken": {"displayName": "test", "role": user[1]}},
            }
        )

    def _create(self, user, match, query) -> None:
        self._send_json(self.hub.create_repo(user, json.loads(self._body())))

    def _validate_yaml(self, user, match, query) -> None:
        content = json.loads(self._body())["content"]
        front = re.match(r"^---\n(.*?)\n---", content, re.DOTALL)
        try:
            data = yaml.safe_load(front.group(1)) if front else {}
        except yaml.YAMLError as error:
            raise HubError(400, None, f"Invalid YAML: {error}") from error
        if not isinstance(data, dict):
            raise HubError(400, None, "YAML metadata is not a mapping")
        self._send_json({"errors": [], "warnings": []})

    def _info(self, user, match, query) -> None:
        repo = self.hub._repo(match["repo"], user)
        commit = self.hub._commit_of(repo, match["rev"] or "main")
        card = {}
        if "README.md" in commit.files:
            text = self.hub._content(commit.files["README.md"]).decode()
            front = re.match(r"^---\n(.*?)\n---", text, re.DOTALL)
            card = yaml.safe_load(front.group(1)) if front else {}
        self._send_json(
            {
                "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
                "id": repo.repo_id,
                "author": repo.owner,
                "sha": commit.oid,
                "lastModified": commit.date,
                "createdAt": repo.commits[next(iter(repo.commits))].date,
                "private": repo.private,
                "gated": False,
                "disabled": False,
                "downloads": 0,
                "likes": 0,
                "tags": [],
                "cardData": card,
                "siblings": [{"rfilename": path} for path in sorted(commit.files)],
            }
        )

    def _preupload(self, user, match, query) -> None:
        repo = self.hub._repo(match["repo"], user)
        if user is None:
            raise HubError(401, None, "Authentication required")
        if "create_pr" not in query:
            self.hub._writable(repo.repo_id, user)
        files = json.loads(self._body())["files"]
        self._send_json(
            {
                "files": [
                    {
                        "path": item["path"],
                        "uploadMode": "lfs" if item["path"].endswith(LFS_SUFFIXES) else "regular",
                        "shouldIgnore": False,
                    }
                    for item in files
                ],
                "commitOid": self.hub._commit_of(repo, match["rev"]).oid,
            }
        )

    def _commit(self, user, match, query) -> None:
        create_pr = query.get("create_pr") == ["1"]
        repo = self.hub._repo(match["repo"], user) if create_pr else self.hub._writable(match["repo"], user)
        if user is None:
            raise HubError(401, None, "Authentication required")
        lines = [json.loads(line) for line in self._body().splitlines() if line.strip()]
        self._send_json(self.hub.commit(repo, match["rev"], lines, create_pr, user[0]))

    def _tree(self, user, match, query) -> None:
        repo = self.hub._repo(match["repo"], user)
        commit = self.hub._commit_of(repo, match["rev"])
        path = unquote(match["path"] or "")
        entries = self.hub.entries(commit, path, query.get("recursive", ["false"])[0].lower() == "true")
        if path and not entries and path not in commit.files:
            raise HubError(404, "EntryNotFound", f"{path} does not exist on {match['rev']}")
        self._send_json(entries)

    def _paths_info(self, user, match, query) -> None:
        repo = self.hub._repo(match["repo"], user)
        commit = self.hub._commit_of(repo, match["rev"])
        form = parse_qs(self._body().decode())
        found = []
        for path in form.get("paths", []):
            if path in commit.files:
                found.append(_file_entry(path, commit.files[path], commit))
            elif any(name.startswith(path.rstrip("/") + "/") for name in commit.files):
                found.append(_folder_entry(path))
        self._send_json(found)

    def _refs(self, user, match, query) -> None:
        repo = self.hub._repo(match["repo"], user)

        def ref(name: str) -> dict:
            full = name if name.startswith("refs/") else f"refs/heads/{name}"
            return {"name": name, "ref": full, "targetCommit": repo.refs[name]}

        self._send_json(
            {
                "branches": [ref(name) for name in repo.refs if not name.startswith("refs/")],
                "converts": [],
                "tags": [],
                "pullRequests": [ref(name) for name in repo.refs if name.startswith("refs/pr/")],
            }
        )

    def _branch(self, user, match, query) -> None:
        repo = self.hub._writable(match["repo"], user)
        body = json.loads(self._body() or b"{}")
        branch = unquote(match["branch"])
        with self.hub.lock:
            if branch in repo.refs:
                raise HubError(409, None, f"Reference {branch} already exists")
            start = self.hub._commit_of(repo, body.get("startingPoint") or "main")
            repo.refs[branch] = start.oid
        self._send_json({})

    def _commits(self, user, match, query) -> None:
        repo = self.hub._repo(match["repo"], user)
        oid: str | None = self.hub._commit_of(repo, match["rev"]).oid
        items = []
        while oid is not None:
            commit = repo.commits[oid]
            items.append(
                {
                    "id": commit.oid,
                    "authors": [{"user": commit.author}],
                    "date": commit.date,
                    "title": commit.title,
                    "message": commit.message,
                }
            )
            oid = commit.parent
        self._send_json(items)

    def _lfs_batch(self, user, match, query) -> None:
        if user is None:
            raise HubError(401, None, "Authentication required")
        self.hub._repo(match["repo"], user)
        request = json.loads(self._body())
        objects = []
        for item in request["objects"]:
            answer = {"oid": item["oid"], "size": item["size"], "authenticated": True}
            if not self.hub._blob_path(item["oid"]).is_file():
                answer["actions"] = {
                    "upload": {
                        "href": f"{self.hub.url}/lfs-upload/{item['oid']}",
                        "header": {},
                        "expires_in": 3600,
                    }
                }
            objects.append(answer)
        self._send_json({"transfer": "basic", "objects": objects, "hash_algo": "sha256"})

    def _lfs_put(self, user, match, query) -> None:
        self.hub.upload_started.set()
        self.hub._uploads_released.wait()
        data = self._body()
        if hashlib.sha256(data).hexdigest() != match["oid"]:
            raise HubError(400, None, "uploaded content does not match its oid")
        path = self.hub._blob_path(match["oid"])
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".part")
        temporary.write_bytes(data)
        temporary.replace(path)
        self._send_json({})

    def _resolve(self, user, match, query) -> None:
        repo = self.hub._repo(match["repo"], user)
        commit = self.hub._commit_of(repo, match["rev"])
        path = unquote(match["path"])
        if path not in commit.files:
            raise HubError(404, "EntryNotFound", f"{path} does not exist on {match['rev']}")
        stored = commit.files[path]
        self.send_response(200)
        self.send_header("Content-Length", str(stored.size))
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("X-Repo-Commit", commit.oid)
        self.send_header("ETag", f'"{stored.blob}"')
        if stored.sha256:
            self.send_header("X-Linked-Etag", f'"{stored.sha256}"')
            self.send_header("X-Linked-Size", str(stored.size))
        self.end_headers()
        if self.command == "GET":
            with self.hub._blob_path(stored.sha256 or stored.blob).open("rb") as handle:
                while chunk := handle.read(1 << 20):
                    self.wfile.write(chunk)


def _handler_for(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    return type("BoundHubHandler", (HubHandler,), {"hub": hub})


def resolve_url(hub: FakeHub, repo_id: str, path: str, revision: str = "main") -> str:
    """The download URL of ``path`` in ``repo_id`` at ``revision``."""
    return f"{hub.url}/datasets/{repo_id}/resolve/{quote(revision, safe='')}/{path}"
