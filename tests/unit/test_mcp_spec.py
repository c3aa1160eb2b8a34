"""What ``--mcp`` names (shell/mcp/spec.py) and what a result is told to the model
(shell/mcp/results.py): pure logic, no server."""

from __future__ import annotations

import json
from types import SimpleNamespace as Block

import pytest

from shell.mcp.results import MAX_RESULT_CHARS, result_text
from shell.mcp.spec import McpServerSpec, McpSpecError, parse_mcp


def test_a_command_is_a_stdio_server_and_a_lone_url_an_http_one():
    assert parse_mcp("python server.py --db 'my cal.sqlite'") == [
        McpServerSpec(command=("python", "server.py", "--db", "my cal.sqlite"))
    ]
    (http,) = parse_mcp("https://crm.example.com/mcp")
    assert (http.url, http.command, http.timeout_s, http.on_barge_in) == (
        "https://crm.example.com/mcp",
        (),
        10.0,
        "cancel",
    )


def test_options_before_the_server_and_headers_from_the_environment(monkeypatch):
    monkeypatch.setenv("CRM_TOKEN", "s3cret")
    text = "name=crm timeout=5 on_barge_in=keep header='Authorization: Bearer ${CRM_TOKEN}' https://u:p@crm.example/mcp"
    (spec,) = parse_mcp(text)
    assert (spec.name, spec.timeout_s, spec.on_barge_in) == ("crm", 5.0, "keep")
    assert spec.headers == (("Authorization", "Bearer s3cret"),)
    assert spec.where == "https://crm.example/mcp"  # no credentials in messages


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "no command or URL"),
        ("timeout=0 python s.py", "timeout='0': seconds, above 0"),
        ("on_barge_in=later python s.py", "on_barge_in='later': cancel or keep"),
        ("name=a.b python s.py", "1-32 letters"),
        ("header='X: 1' python s.py", "header= is for servers reached by URL"),
        ("header=nocolon https://x/mcp", "'Name: value'"),
        ("header='A: ${NOT_SET_ANYWHERE}' https://x/mcp", "${NOT_SET_ANYWHERE} is not set"),
        ("ftp://x/mcp", "a URL is http:// or https://"),
        ("python 'unclosed", "No closing quotation"),
    ],
)
def test_a_wrong_mcp_is_one_line_saying_what(text, said):
    with pytest.raises(McpSpecError) as e:
        parse_mcp(text)
    assert said in str(e.value) and "\n" not in str(e.value)


def test_an_mcp_servers_file_as_other_clients_write_it(tmp_path):
    path = tmp_path / "servers.json"
    path.write_text(json.dumps({"mcpServers": {
        "calendar": {"command": "npx", "args": ["-y", "@acme/calendar-mcp"], "env": {"TZ": "UTC"}, "timeout": 4},
        "crm": {"url": "https://crm.example/mcp", "headers": {"X-Key": "k"}, "on_barge_in": "keep"},
    }}))  # fmt: skip
    calendar, crm = parse_mcp(str(path))
    assert (calendar.name, calendar.command, calendar.env, calendar.timeout_s) == (
        "calendar", ("npx", "-y", "@acme/calendar-mcp"), (("TZ", "UTC"),), 4.0)  # fmt: skip
    assert (crm.name, crm.url, crm.headers, crm.on_barge_in) == (
        "crm",
        "https://crm.example/mcp",
        (("X-Key", "k"),),
        "keep",
    )
    path.write_text(json.dumps({"mcpServers": {"x": {"command": "a", "retries": 3}}}))
    with pytest.raises(McpSpecError, match="retries: not a key"):
        parse_mcp(str(path))
    with pytest.raises(McpSpecError, match="no servers"):
        path.write_text("{}")
        parse_mcp(str(path))


def result(*content, structured=None, is_error=False):
    return Block(content=list(content), structured_content=structured, is_error=is_error)


def text(t):
    return Block(type="text", text=t)


def test_a_result_is_its_text_with_json_on_one_line_and_what_cannot_be_said_named():
    assert result_text(result(text("It ships today."))) == (False, "It ships today.")
    assert result_text(result(text('{\n  "opens": "9 am"\n}'))) == (False, '{"opens": "9 am"}')
    image = Block(type="image", mime_type="image/png")
    link = Block(type="resource_link", name="invoice", uri="file:///i.pdf")
    assert result_text(result(text("Here:"), image, link)) == (
        False, "Here:\n(an image, image/png, that cannot be said)\n(a link to invoice: file:///i.pdf)")  # fmt: skip
    assert result_text(result(structured={"result": 42})) == (False, "42")  # no text: the structured content
    assert result_text(result(text("no such order"), is_error=True)) == (True, "no such order")
    assert result_text(result()) == (False, "(no result)")
    long = result_text(result(text("x" * 5000)))[1]
    assert len(long) < MAX_RESULT_CHARS + 30 and long.endswith("(the rest was cut)")
