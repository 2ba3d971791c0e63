"""A stand-in for the Hugging Face hub on loopback: one model repo's files in the hub's URL
layout, counting the bytes it sends and able to drop a connection mid-file."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from aiohttp import web

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class HubStandIn:
    """`files`: name -> bytes of repo `repo_id`. `cut_after[name] = n`: the next GET of that
    file sends n bytes and then drops the connection (once)."""

    def __init__(self, repo_id: str, files: dict[str, bytes]) -> None:
        self.repo_id = repo_id
        self.files = files
        self.sent: dict[str, int] = {name: 0 for name in files}  # bytes of each file sent
        self.ranges: list[str] = []  # Range headers asked for
        self.cut_after: dict[str, int] = {}
        self.piece_delay = 0.0  # > 0: bodies go out in 16 KiB pieces this many seconds apart
        self.runner: web.AppRunner | None = None
        self.url = ""

    @classmethod
    def from_dir(cls, repo_id: str, folder: Path) -> HubStandIn:
        return cls(repo_id, {p.name: p.read_bytes() for p in sorted(folder.iterdir())
                             if p.is_file()})

    async def start(self) -> str:
        app = web.Application()
        org, name = self.repo_id.split("/")
        app.router.add_get(f"/api/models/{org}/{name}/revision/{{rev}}", self.info)
        app.router.add_route("HEAD", f"/{org}/{name}/resolve/{{rev}}/{{file:.+}}", self.head)
        app.router.add_get(f"/{org}/{name}/resolve/{{rev}}/{{file:.+}}", self.get,
                           allow_head=False)
        app.router.add_get("/api/models/{tail:.+}", self.no_repo)  # any other repo
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    def _etag(self, name: str) -> str:
        return hashlib.sha256(self.files[name]).hexdigest()

    async def info(self, request: web.Request) -> web.Response:
        return web.json_response({
            "_id": "x", "id": self.repo_id, "modelId": self.repo_id, "sha": COMMIT,
            "private": False, "disabled": False, "gated": False, "tags": [],
            # with ?blobs=true (files_metadata) the hub gives each file's size
            "siblings": [{"rfilename": name, "size": len(data)}
                         for name, data in self.files.items()]})

    async def no_repo(self, request: web.Request) -> web.Response:
        # as huggingface.co answers for a repo that does not exist (or is private)
        return web.json_response({"error": "Repository Not Found"}, status=401,
                                 headers={"X-Error-Code": "RepoNotFound",
                                          "X-Error-Message": "Repository not found"})

    def _headers(self, name: str) -> dict[str, str]:
        return {"X-Repo-Commit": COMMIT, "ETag": f'"{self._etag(name)}"',
                "Accept-Ranges": "bytes"}

    async def head(self, request: web.Request) -> web.Response:
        name = request.match_info["file"]
        if name not in self.files:
            return web.json_response({"error": "Entry not found"}, status=404,
                                     headers={"X-Error-Code": "EntryNotFound"})
        return web.Response(headers=self._headers(name)
                            | {"Content-Length": str(len(self.files[name]))})

    async def get(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["file"]
        if name not in self.files:
            return web.json_response({"error": "Entry not found"}, status=404)
        data = self.files[name]
        start, status = 0, 200
        headers = self._headers(name)
        if (asked := request.headers.get("Range")) is not None:
            self.ranges.append(asked)
            start = int(asked.removeprefix("bytes=").split("-")[0])
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        response = web.StreamResponse(status=status, headers=headers)
        response.content_length = len(body)
        await response.prepare(request)
        cut = self.cut_after.pop(name, None)
        if cut is not None:
            await response.write(body[:cut])
            self.sent[name] += cut
            request.transport.close()  # type: ignore[union-attr]  # mid-file, like a dropped link
            return response
        step = 1 << 14 if self.piece_delay else max(len(body), 1)
        for at in range(0, len(body), step):
            await response.write(body[at:at + step])
            self.sent[name] += len(body[at:at + step])
            if self.piece_delay:
                await asyncio.sleep(self.piece_delay)
        await response.write_eof()
        return response
