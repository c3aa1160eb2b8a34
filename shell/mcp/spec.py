"""Which MCP servers to use, as ``--mcp`` names them (no I/O but reading a ``.json`` file).

Three forms, each an :class:`McpServerSpec` or several::

    --mcp "python calendar_server.py --db cal.sqlite"     a command: started, spoken to over stdio
    --mcp https://crm.example.com/mcp                     a URL: streamable HTTP
    --mcp servers.json                                    the ``mcpServers`` file MCP clients share

Options for one server go before its command or URL, as ``key=value`` words::

    --mcp "name=crm timeout=5 on_barge_in=keep header='Authorization: Bearer ${CRM_TOKEN}' https://crm.example.com/mcp"

``name``: the server's name in the start-up line, events, stored turns and tool names that
clash (default: the name the server gives itself). ``timeout``: seconds a call may take
(default 10). ``on_barge_in``: ``cancel`` (default) sends MCP's cancellation for a call in
flight when the person speaks over the reply; ``keep`` lets it finish and stores its result
(a tool that books or pays). ``header`` (repeatable, URLs only): sent with every request;
``${NAME}`` is taken from the environment, so that a token is not on the command line. In
a ``.json`` file the same options are a server's ``timeout``, ``on_barge_in`` and
``headers`` keys, beside ``command``, ``args``, ``env`` and ``url``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
from pathlib import Path
from typing import Any, Literal

DEFAULT_TIMEOUT_S = 10.0
BargeInPolicy = Literal["cancel", "keep"]
_OPTION = re.compile(r"(name|timeout|on_barge_in|header)=(.*)", re.DOTALL)
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpSpecError(ValueError):
    """An ``--mcp`` that names no server that could be started (said in one line)."""


@dataclasses.dataclass(frozen=True)
class McpServerSpec:
    """One MCP server: a command to start (stdio) or a URL (streamable HTTP), and its options."""

    command: tuple[str, ...] = ()
    url: str | None = None
    name: str | None = None  # None: the name the server gives itself
    headers: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # a command's, over ours
    timeout_s: float = DEFAULT_TIMEOUT_S
    on_barge_in: BargeInPolicy = "cancel"

    @property
    def where(self) -> str:
        """The command or the URL, as a person would recognise it in a message (no credentials)."""
        if self.url is not None:
            return re.sub(r"//[^/@]*@", "//", self.url)
        return shlex.join(self.command)


def parse_mcp(text: str) -> list[McpServerSpec]:
    """The servers one ``--mcp`` names; raises :class:`McpSpecError` saying what is wrong."""
    text = text.strip()
    if text.endswith(".json") and not any(c.isspace() for c in text):
        return _from_file(Path(text))
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise McpSpecError(f"{text!r}: {e}") from None
    options: dict[str, Any] = {"headers": []}
    while words and (m := _OPTION.fullmatch(words[0])):
        key, value = m.groups()
        words.pop(0)
        if key == "header":
            options["headers"].append(_header(value))
        else:
            options[key] = value
    if not words:
        raise McpSpecError(f"{text!r}: no command or URL to reach the server by")
    if len(words) == 1 and re.match(r"https?://", words[0]):
        return [_spec(text, url=words[0], **options)]
    if re.match(r"[a-z]+://", words[0]):
        raise McpSpecError(f"{text!r}: a URL is http:// or https://, alone (stdio servers are commands)")
    if options["headers"]:
        raise McpSpecError(f"{text!r}: header= is for servers reached by URL")
    return [_spec(text, command=tuple(words), **options)]


def _spec(where: str, **fields: Any) -> McpServerSpec:
    name = fields.pop("name", None)
    if name is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", name):
        raise McpSpecError(f"{where}: name={name!r}: 1-32 letters, digits, _ or -")
    timeout = fields.pop("timeout", DEFAULT_TIMEOUT_S)
    try:
        timeout_s = float(timeout)
    except (TypeError, ValueError):
        timeout_s = -1.0
    if not 0 < timeout_s <= 3600:
        raise McpSpecError(f"{where}: timeout={timeout!r}: seconds, above 0 and at most 3600")
    policy = fields.pop("on_barge_in", "cancel")
    if policy not in ("cancel", "keep"):
        raise McpSpecError(f"{where}: on_barge_in={policy!r}: cancel or keep")
    headers = tuple(fields.pop("headers", ()))
    env = tuple(fields.pop("env", ()))
    return McpServerSpec(name=name, timeout_s=timeout_s, on_barge_in=policy, headers=headers, env=env, **fields)


def _header(value: str) -> tuple[str, str]:
    key, colon, rest = value.partition(":")
    if not colon or not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", key.strip()):
        raise McpSpecError(f"header={value!r}: 'Name: value'")
    return key.strip(), _expand(rest.strip())


def _expand(value: str) -> str:
    """``${NAME}`` from the environment; a name that is not set is an error, not an empty token."""

    def one(m: re.Match[str]) -> str:
        if m.group(1) not in os.environ:
            raise McpSpecError(f"${{{m.group(1)}}} is not set in the environment")
        return os.environ[m.group(1)]

    return _ENV_REF.sub(one, value)


def _from_file(path: Path) -> list[McpServerSpec]:
    """The ``mcpServers`` object of a JSON file (``servers``, as some clients name it, too)."""
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise McpSpecError(f"{path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise McpSpecError(f"{path}:{e.lineno}: not JSON ({e.msg})") from None
    servers = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise McpSpecError(f"{path}: no servers (an object of them under 'mcpServers')")
    return [_from_entry(f"{path}: {name}", name, entry) for name, entry in servers.items()]


def _from_entry(where: str, name: str, entry: Any) -> McpServerSpec:
    if not isinstance(entry, dict):
        raise McpSpecError(f"{where}: a server is an object with 'command' or 'url'")
    known = {"command", "args", "env", "url", "serverUrl", "type", "headers", "timeout", "on_barge_in"}
    if unknown := sorted(set(entry) - known):
        raise McpSpecError(f"{where}: {', '.join(unknown)}: not a key a server has here ({', '.join(sorted(known))})")
    options = {"name": name, "timeout": entry.get("timeout", DEFAULT_TIMEOUT_S)}
    options["on_barge_in"] = entry.get("on_barge_in", "cancel")
    url = entry.get("url", entry.get("serverUrl"))
    headers = entry.get("headers") or {}
    if not isinstance(headers, dict):
        raise McpSpecError(f"{where}: headers is an object of names and values")
    if url is not None:
        if not isinstance(url, str) or not re.match(r"https?://", url):
            raise McpSpecError(f"{where}: url {url!r} is not http:// or https://")
        pairs = [(str(k), _expand(str(v))) for k, v in headers.items()]
        return _spec(where, url=url, headers=pairs, **options)
    command, args, env = entry.get("command"), entry.get("args") or [], entry.get("env") or {}
    if not isinstance(command, str) or not command.strip():
        raise McpSpecError(f"{where}: neither a command nor a url")
    if not isinstance(args, list) or not isinstance(env, dict):
        raise McpSpecError(f"{where}: args is a list and env an object")
    words = (command, *map(str, args))
    return _spec(where, command=words, env=[(str(k), _expand(str(v))) for k, v in env.items()], **options)
