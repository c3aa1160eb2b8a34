"""One MCP server, kept reachable: connected, its tools listed, restarted when it dies.

A supervisor task owns the SDK's client (its anyio scopes must be entered
and left in one task) and holds the connection open. Calls come from the
sessions' tool tasks. When a call finds the connection closed (a stdio
server that exited, an HTTP server gone), or a call times out and the server
then does not answer a listing within :data:`PROBE_TIMEOUT_S` (a server that
hangs), the connection is dropped and opened again after a backoff that
doubles from :data:`BACKOFF_S` to :data:`MAX_BACKOFF_S`: a stdio server is
started anew, an HTTP server asked again. Calls made while it is down fail
at once with a reason the model can apologise from; a call made while the
first restart is under way waits for it, within the call's timeout. A server
that announces a changed tool list (``notifications/tools/list_changed``, or
a ``subscriptions/listen`` event on 2026 servers) is listed again.

A stdio server that exits between calls is noticed before the next call
needs it: at once where its change stream breaks (2026 servers), else by a
listing every :data:`HEARTBEAT_S` while no call runs. It is started again,
so the call after it does not fail.

A stdio server's stderr goes to a file of its own (:attr:`McpConnection.log_path`),
not to the terminal: servers log every call there. Its last line is quoted when
the server fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal

from shell.mcp.spec import McpServerSpec

log = logging.getLogger("voice.mcp")
# The SDK's HTTP client logs every request at INFO: a line per tool call on the desk's console.
logging.getLogger("httpx2").setLevel(logging.WARNING)

BACKOFF_S = 0.5  # the first restart's wait; doubled after each failed one
MAX_BACKOFF_S = 30.0
PROBE_TIMEOUT_S = 3.0  # a server that does not list its tools in this long after a timeout is hung
HEARTBEAT_S = 10.0  # an idle stdio server is asked for its tools this often: has it exited?
CONNECTION_CLOSED = -32000  # MCP's (JSON-RPC's) code for a connection that closed under a request

State = Literal["starting", "up", "restarting", "down", "closed"]


class McpUnavailable(Exception):
    """The server cannot take a call now: why, in words the model can pass on."""


class McpConnection:
    """One server: :meth:`start`, then :meth:`call` its tools (:attr:`tools`), :meth:`close`."""

    def __init__(self, spec: McpServerSpec, on_tools: Callable[[McpConnection], None]) -> None:
        """``on_tools``: told each time the tool list is listed anew (after a change or a restart)."""
        self.spec = spec
        self.name = spec.name or ""  # the server's own name once connected, unless the spec gives one
        self.tools: list[Any] = []  # the SDK's Tool objects, as last listed
        self.state: State = "starting"
        self.restarts = 0  # attempts to connect again, over the session
        self._failed = 0  # attempts that failed since it was last up
        self._calls = 0  # calls running now: no heartbeat is needed meanwhile
        self._on_tools = on_tools
        self._client: Any = None
        self._up = asyncio.Event()
        self._broken = asyncio.Event()
        self._relist = asyncio.Event()
        self._why = ""  # why it is down, for calls made meanwhile
        self._task: asyncio.Task | None = None
        self._log_file = None
        self._http_error = ""  # the last HTTP error status, said with the failure it caused
        self.log_path: Path | None = None

    # -- the sessions' side -------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        """The ``CallToolResult`` of tool ``name``; raises :class:`McpUnavailable` when the server
        cannot answer (it is down, or its connection closed under the call). Cancelling the task
        awaiting this sends MCP's cancellation for the request."""
        client = self._client
        if client is None and self.state == "restarting" and not self._failed:
            await self._up.wait()  # the first restart after a failure: wait for it (the caller times out)
            client = self._client
        if client is None:
            raise McpUnavailable(f"the {self.name} server is not running ({self._why or self.state})")
        self._calls += 1
        try:
            return await client.call_tool(name, arguments)
        except Exception as e:
            if getattr(e, "code", None) == CONNECTION_CLOSED or isinstance(e, OSError | EOFError):
                self._lost(f"its connection closed: {getattr(e, 'message', e)}")
                raise McpUnavailable(f"the {self.name} server stopped during the call; it is being restarted") from e
            raise
        finally:
            self._calls -= 1

    def timed_out(self) -> None:
        """A call took longer than its timeout (and was cancelled): is the server hung?"""
        if self._client is not None:
            asyncio.get_running_loop().create_task(self._probe(self._client))

    # -- life ---------------------------------------------------------------

    async def start(self, timeout_s: float) -> None:
        """Connect and list the tools; raises with the reason if that fails within ``timeout_s``."""
        first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.get_running_loop().create_task(self._supervise(first), name=f"mcp {self.spec.where}")
        try:
            await asyncio.wait_for(asyncio.shield(first), timeout_s)
        except TimeoutError:
            await self.close()
            raise TimeoutError(f"no answer in {timeout_s:g} s{self._stderr_tail()}") from None
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        self.state = "closed"
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self._log_file is not None:
            self._log_file.close()

    async def _supervise(self, first: asyncio.Future[None]) -> None:
        delay = BACKOFF_S
        while True:
            connected = False
            try:
                async with self._open() as client:
                    self._broken.clear()
                    await self._list(client)
                    self._client, self.state, self._failed = client, "up", 0
                    connected = True
                    self._up.set()
                    if not first.done():
                        first.set_result(None)
                    elif self.restarts:
                        log.warning("mcp %s: restarted (%d)", self.name, self.restarts)
                    delay = BACKOFF_S
                    await self._watch(client)
            except asyncio.CancelledError:
                raise
            except BaseException as e:  # a start that failed, or a connection torn down under us
                reason = _reason(e)
                if not first.done():
                    first.set_exception(ConnectionError(f"{reason}{self._stderr_tail()}"))
                    return
                self._why = self._why or reason
                self._failed += not connected
            finally:
                self._client = None
                self._up.clear()
            if self.state == "closed":
                return
            self.state = "restarting"
            log.warning("mcp %s: %s%s; restarting in %g s", self.name, self._why, self._stderr_tail(), delay)
            await asyncio.sleep(delay)
            self.restarts += 1
            self._why = ""
            delay = min(delay * 2, MAX_BACKOFF_S)

    @contextlib.asynccontextmanager
    async def _open(self) -> AsyncIterator[Any]:
        """The SDK's client, connected (stdio: the command started; HTTP: the headers on every request)."""
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        spec = self.spec
        async with contextlib.AsyncExitStack() as stack:
            if spec.url is not None:
                http = await stack.enter_async_context(create_mcp_http_client(headers=dict(spec.headers)))
                http.event_hooks["response"] = [self._on_http_response]
                transport: Any = streamable_http_client(spec.url, http_client=http)
            else:
                command, *args = spec.command
                params = StdioServerParameters(command=command, args=args, env=dict(spec.env) or None)
                transport = stdio_client(params, errlog=self._stderr())
            # No response cache: a listing is asked for only when it changed.
            client = Client(transport, message_handler=self._on_message, cache=None)
            yield await stack.enter_async_context(client)

    async def _on_http_response(self, response: Any) -> None:
        """The SDK says only "Server returned an error response": the status says why (401: the token)."""
        if response.status_code >= 400:
            self._http_error = f" (HTTP {response.status_code} {response.reason_phrase})"

    async def _list(self, client: Any) -> None:
        tools, cursor = [], None
        for _ in range(100):  # pages; a server that pages forever is cut off
            page = await client.list_tools(cursor=cursor)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        if not self.spec.name:
            info = client.server_info
            self.name = _name_of(info.name if info is not None else "", self.spec)
        self.tools = tools
        self._on_tools(self)

    async def _watch(self, client: Any) -> None:
        """While connected: list again on a change; return when the connection is lost."""
        waits = [asyncio.ensure_future(self._broken.wait()), asyncio.ensure_future(self._relister(client))]
        capabilities = client.server_capabilities
        if client.protocol_version >= "2026" and capabilities.tools is not None and capabilities.tools.list_changed:
            waits.append(asyncio.ensure_future(self._listen(client)))
        if self.spec.url is None:  # HTTP: a server gone is found by the next call, and reached again in ms
            waits.append(asyncio.ensure_future(self._heartbeat(client)))
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # a listing that failed: the connection is torn down and opened again
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)

    async def _relister(self, client: Any) -> None:
        while True:
            await self._relist.wait()
            self._relist.clear()
            await self._list(client)
            log.info("mcp %s: tools listed again: %s", self.name, ", ".join(t.name for t in self.tools))

    async def _listen(self, client: Any) -> None:
        """2026 servers announce changes on a ``subscriptions/listen`` stream, to those who listen."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    self._relist.set()
        except Exception as e:
            await self._alive(client)  # the stream broke because the server exited: restart it now
            # A server that will not stream: changes are not heard, calls still work.
            log.info("mcp %s: not listening for tool changes: %s", self.name, _reason(e))
        await asyncio.Event().wait()

    async def _heartbeat(self, client: Any) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            if not self._calls:  # a running call finds a dead server itself, and its timeout a hung one
                await self._alive(client)

    async def _alive(self, client: Any) -> None:
        """Raises (and so restarts the connection) unless the server answers a listing.
        Sent to a closed connection, the listing fails at once."""
        try:
            await asyncio.wait_for(client.list_tools(), PROBE_TIMEOUT_S)
        except Exception as e:
            raise ConnectionError(f"it stopped answering between calls ({_reason(e)})") from e

    async def _on_message(self, message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method == "notifications/tools/list_changed":
            self._relist.set()
        elif isinstance(message, Exception):
            log.warning("mcp %s: %s", self.name, _reason(message))

    async def _probe(self, client: Any) -> None:
        try:
            await asyncio.wait_for(client.list_tools(), PROBE_TIMEOUT_S)
        except Exception:
            if client is self._client:
                self._lost(f"it did not answer for {PROBE_TIMEOUT_S:g} s after a call timed out")

    def _lost(self, why: str) -> None:
        if self.state == "up":
            self._why = why
            self.state = "restarting"
            self._client = None
            self._up.clear()
            self._broken.set()

    def _stderr(self):
        """Where a stdio server's stderr goes: a file of its own, kept for the session."""
        if self._log_file is None:
            self._log_file = tempfile.NamedTemporaryFile("w+", prefix="voice-mcp-", suffix=".log")  # noqa: SIM115
            self.log_path = Path(self._log_file.name)
        return self._log_file

    def _stderr_tail(self) -> str:
        """What the server said last: its stderr's last line, or the HTTP status that failed."""
        if self._http_error:
            said, self._http_error = self._http_error, ""
            return said
        if self.log_path is None or not self.log_path.exists():
            return ""
        lines = [line.strip() for line in self.log_path.read_text(errors="replace").splitlines() if line.strip()]
        return f" (its stderr: {lines[-1][:200]})" if lines else ""


def _reason(e: BaseException) -> str:
    """The innermost cause of ``e`` in one line (anyio wraps errors in groups)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    text = str(getattr(e, "message", "") or e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _name_of(announced: str, spec: McpServerSpec) -> str:
    """A short name: the server's own, else the command's script or the URL's host."""
    import re
    from urllib.parse import urlparse

    if not announced:
        if spec.url is not None:
            announced = urlparse(spec.url).hostname or "mcp"
        else:
            words = [w for w in spec.command if not w.startswith("-")]
            announced = Path(words[-1] if len(words) > 1 else words[0]).stem
    return re.sub(r"[^A-Za-z0-9_-]+", "_", announced).strip("_")[:32] or "mcp"
