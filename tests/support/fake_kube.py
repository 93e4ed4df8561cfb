"""A small stand-in for the Kubernetes API server, on a free local port, for the ``kubernetes`` client.

It keeps objects by collection path (``/apis/<group>/<version>/namespaces/<ns>/<plural>``), answers
create (409 when the name exists), get, list (with ``labelSelector`` equality terms), delete, a JSON merge
patch (``application/merge-patch+json``, 409 on a stale ``metadata.resourceVersion``), a pod's log
and Kueue's visibility API, and records every request (method, path, query, JSON body, Authorization) so
tests assert on what the client SENT. Requests without an EKS token (``Bearer k8s-aws-v1.``) get 401.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOKEN_PREFIX = "k8s-aws-v1."


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    auth: str


@dataclass
class FakeKube:
    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)  # collection -> name -> obj
    logs: dict[str, list[str]] = field(default_factory=dict)  # "<ns>/<pod>/<container>" -> lines
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)  # "<ns>/<lq>" -> PendingWorkloadsSummary
    requests: list[Request] = field(default_factory=list)
    refuse: int | None = None  # answer every API request with this status (401, 403)
    keep_deleted: bool = False  # a deleted object stays (a stuck finalizer)

    def put(self, collection: str, obj: dict[str, Any]) -> None:
        self.objects.setdefault(collection, {})[obj["metadata"]["name"]] = obj

    def sent(self, method: str, path_part: str = "") -> list[Request]:
        return [r for r in self.requests if r.method == method and path_part in r.path]

    # -- the server ---------------------------------------------------------------------------------------

    def start(self) -> FakeKube:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self, method: str) -> None:
                parts = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                auth = self.headers.get("Authorization", "")
                fake.requests.append(
                    Request(method, parts.path, urllib.parse.parse_qs(parts.query), body, auth)
                )
                if not auth.startswith(f"Bearer {TOKEN_PREFIX}"):
                    return self._send(401, _status(401, "Unauthorized"))
                if fake.refuse:
                    return self._send(fake.refuse, _status(fake.refuse, "Forbidden"))
                status, answer = fake.answer(method, parts.path, urllib.parse.parse_qs(parts.query), body)
                if isinstance(answer, str):
                    return self._send_text(status, answer)
                return self._send(status, answer)

            def do_GET(self) -> None:  # noqa: N802 (http.server's names)
                self._handle("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._handle("POST")

            def do_DELETE(self) -> None:  # noqa: N802
                self._handle("DELETE")

            def do_PATCH(self) -> None:  # noqa: N802
                if self.headers.get("Content-Type") != "application/merge-patch+json":
                    return self._send(415, _status(415, "UnsupportedMediaType"))
                self._handle("PATCH")

            def _send(self, status: int, body: Any) -> None:
                self._send_text(status, json.dumps(body), "application/json")

            def _send_text(self, status: int, text: str, kind: str = "text/plain") -> None:
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        if path.startswith("/apis/visibility.kueue.x-k8s.io/"):
            # .../namespaces/<ns>/localqueues/<lq>/pendingworkloads
            seg = path.split("/")
            key = f"{seg[5]}/{seg[7]}"
            if key not in self.pending:
                return 404, _status(404, "NotFound")
            return 200, self.pending[key]
        if path.endswith("/log"):  # /api/v1/namespaces/<ns>/pods/<pod>/log
            seg = path.split("/")
            key = f"{seg[4]}/{seg[6]}/{query.get('container', [''])[0]}"
            if key not in self.logs:
                return 404, _status(404, "NotFound")
            return 200, "".join(line + "\n" for line in self.logs[key])
        collection, _, name = path.rpartition("/")
        if method == "POST":
            items = self.objects.setdefault(path, {})
            if body["metadata"]["name"] in items:
                return 409, _status(409, "AlreadyExists")
            created = {**body, "metadata": {**body["metadata"], "uid": "uid-1", "creationTimestamp": NOW}}
            items[body["metadata"]["name"]] = created
            return 201, created
        if method == "GET" and path in self.objects or (method == "GET" and _is_collection(path)):
            items = list(self.objects.get(path, {}).values())
            selector = query.get("labelSelector", [""])[0]
            terms = [t.split("=", 1) for t in selector.split(",") if t]
            items = [o for o in items if all(o["metadata"].get("labels", {}).get(k) == v for k, v in terms)]
            return 200, {"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items}
        obj = self.objects.get(collection, {}).get(name)
        if obj is None:
            return 404, _status(404, "NotFound")
        if method == "PATCH":
            sent = (body.get("metadata") or {}).get("resourceVersion")
            if sent is not None and sent != obj["metadata"].get("resourceVersion"):
                return 409, _status(409, "Conflict")
            patched = merge_patch(obj, body)
            patched["metadata"]["resourceVersion"] = str(int(obj["metadata"].get("resourceVersion") or 0) + 1)
            self.objects[collection][name] = patched
            return 200, patched
        if method == "DELETE":
            if not self.keep_deleted:
                del self.objects[collection][name]
            return 200, obj
        return 200, obj


NOW = "2026-12-02T02:00:00Z"
COLLECTIONS = ("trainjobs", "workloads", "pods", "events")


def _is_collection(path: str) -> bool:
    return path.rsplit("/", 1)[-1] in COLLECTIONS


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies application/merge-patch+json."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _status(code: int, reason: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code}
