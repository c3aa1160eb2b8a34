"""``python -m voice.agent check FILE`` and ``python -m voice.agent graph FILE``.

``check`` reads an agent file (YAML or Python) and checks its flow: ``FILE: ok (N steps, M
transitions)`` and exit 0, or every problem on a line of its own (``FILE: step details: ...``)
and exit 1. ``graph`` prints the flow as a Mermaid flowchart (its problems, if any, on stderr,
and exit 1). A wrong command line exits 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.flow_graph import mermaid, problems
from voice.agent.load import AgentFileError, load_agent, read_agent


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m voice.agent", description="Check or draw an agent file.")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="say whether an agent file can run, every problem on a line")
    check.add_argument("file", type=Path, metavar="FILE", help="an agent file (.yaml or .py)")
    graph = sub.add_parser("graph", help="print an agent's steps as a Mermaid flowchart")
    graph.add_argument("file", type=Path, metavar="FILE", help="an agent file (.yaml or .py)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "check":
        try:
            agent = load_agent(args.file)
        except AgentFileError as e:
            print("\n".join(e.lines))
            return 1
        steps = agent.flow.steps.values()
        transitions = sum(len(s.transitions) for s in steps)
        print(f"{args.file}: ok ({_count(len(steps), 'step')}, {_count(transitions, 'transition')})")
        return 0
    try:
        agent = read_agent(args.file)
    except AgentFileError as e:
        print(e, file=sys.stderr)
        return 1
    print(mermaid(agent.flow), end="")
    found = problems(agent.flow, known_tools={t.name for t in agent.tools})
    for p in found:
        print(f"{args.file}: {p}", file=sys.stderr)
    return 1 if found else 0


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


if __name__ == "__main__":
    sys.exit(main())
