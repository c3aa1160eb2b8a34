"""What the assistant says, scored without a person: ``python -m voice.bench answers``.

    python -m voice.bench answers [--configs smollm2,qwen,qwen+tools] [--categories C,...] [--per-category N]
                                  [--real-time N] [--judge-url URL] [--out DIR]

Each request of :mod:`voice.bench.answer_requests` (66: everyday facts, arithmetic and units, the time,
a shop's MCP tools, requests that need no tool, follow-ups, corrections, other languages, real
people's recordings) is one conversation on virtual time, on the real engines, said by a voice that
is not the assistant's (or played from the recording). Per configuration (model, prompt, tools), in
the same run:

- **facts**: the reply holds one of the accepted forms of the answer (the rubric), and none of the wrong ones;
- **tool decisions**: the right tool with arguments that mean the right thing, or no call where none is needed
  (only where the configuration offers tools);
- **sense**: the judge (the largest bundled model provisioned, :func:`judge_model`, or ``--judge-url``)
  asked whether the reply is a sensible answer on topic; its agreement with the rubric where there is one;
- **form for the ear**: markdown, lists, URLs, emoji or code in what was said, and replies over
  :data:`LONG_WORDS` words;
- **voice-to-voice**: from the end of the person's speech to the reply's first sample (virtual time: the
  engines' work is counted, the machine's load is not); with ``--real-time N``, the first N requests
  again on the wall clock, where the engines' speed counts (run it on an otherwise idle machine).

Prints a table and writes DIR/answers.json with every reply.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.events import PlaybackStart, ToolCallEnd, ToolCallStart
from core.voices import BEST_BUNDLED
from llm.base import LLM
from shell.models import LLM_MODELS, models_dir
from voice.app.latency import percentile
from voice.bench.answer_requests import CATEGORIES, REQUESTS, Request, score_facts, score_tool
from voice.bench.common import ROOT, parser
from voice.scenario.runner import LoadedEngines, ScenarioResult, agent_setup, run_scenario, yes_and_no
from voice.scenario.spec import Person, Scenario, Turn

SHOP_SERVER = ROOT / "tests" / "fixtures" / "mcp" / "shop_server.py"
LONG_WORDS = 60  # a spoken reply longer than this was not asked for by any request here
# The judge is the largest bundled model that is provisioned: the 1.5B is optional (OPTIONAL_MODELS).
JUDGE_MODELS = ("qwen2.5-coder-1.5b", "qwen2.5-coder-0.5b")


def judge_model() -> str:
    """The largest of :data:`JUDGE_MODELS` in the models folder (the last one, to fail clearly, if none is)."""
    for name in JUDGE_MODELS:
        if (models_dir() / LLM_MODELS[name]).exists():
            return name
    return JUDGE_MODELS[-1]


@dataclass(frozen=True)
class Config:
    """One way of answering: voice.run's options by name (as a scenario's ``agent``)."""

    name: str
    agent: dict[str, Any]
    tools: bool = False  # offers the built-in tools and the shop's MCP server

    def agent_for(self, request: Request) -> dict[str, Any]:
        agent = dict(self.agent)
        if request.language != "en":
            agent["language"] = request.language
        if self.tools:
            agent["tools"] = ["builtin"]
            agent["mcp"] = f"{sys.executable} {SHOP_SERVER}"
        return agent


CONFIGS = {
    c.name: c
    for c in (
        Config("smollm2", {"llm_model": "smollm2-135m"}),  # the default until issue 45
        Config("qwen", {"llm_model": "qwen2.5-coder-0.5b"}),
        Config("qwen+tools", {"llm_model": "qwen2.5-coder-0.5b"}, tools=True),
        # Optional set-up (shell.models.OPTIONAL_MODELS): the largest bundled model, about 3x slower.
        Config("qwen1.5b", {"llm_model": "qwen2.5-coder-1.5b"}),
        Config("qwen1.5b+tools", {"llm_model": "qwen2.5-coder-1.5b"}, tools=True),
    )
}


def scenario_of(request: Request, config: Config) -> Scenario:
    """The request as a conversation: each turn said (or played) after the reply to the one before."""
    turns = tuple(
        Turn(
            text=None if t.recording else t.say,
            audio=(ROOT / t.recording).resolve() if t.recording else None,
        )
        for t in request.turns
    )
    return Scenario(
        name=request.id,
        path=ROOT / "voice" / "bench" / f"{request.id}.answers",
        agent=config.agent_for(request),
        call=False,
        # Said in the language's own bundled voice (joe read "¿Cuál es la capital de Francia?" as English).
        person=Person(voice=BEST_BUNDLED.get(request.language, "joe"), language=request.language),
        turns=turns,
    )


# -- form for the ear ----------------------------------------------------------

FORM_FAULTS = {
    "markdown": re.compile(r"\*\*|__|`|^\s*#{1,6}\s|\[[^\]]+\]\([^)]+\)", re.MULTILINE),
    "list": re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+\S", re.MULTILINE),
    "url": re.compile(r"https?://|www\.|\b[\w-]+\.(?:com|org|net|io)\b", re.IGNORECASE),
    "emoji": re.compile("[\U0001f300-\U0001faff\u2600-\u27bf]"),
    "code": re.compile(r"```|\bdef |\bprint\(|\breturn\b.*;|[{};]\s*$", re.MULTILINE),
    "math": re.compile(r"\\(?:[dt]?frac|times|cdot|sqrt|div)\b|\\[()\[\]]"),  # LaTeX: "backslash frac"
}


def form_faults(said: str) -> list[str]:
    """What in ``said`` (a reply as spoken and stored) is not for the ear."""
    out = [name for name, pattern in FORM_FAULTS.items() if pattern.search(said)]
    if len(said.split()) > LONG_WORDS:
        out.append("long")
    return out


# -- one request ---------------------------------------------------------------


def turn_figures(request: Request, result: ScenarioResult) -> list[dict[str, Any]]:
    """What each turn heard, said and called, and how it scores."""
    obs = result.observed
    rows: list[dict[str, Any]] = []
    for i, turn in enumerate(request.turns):
        placed = next((p for p in obs.placed if p.index == i), None)
        utterances = obs.utterances(placed) if placed is not None else set()
        replies = obs.replies(utterances)
        calls = [e for e in obs.of(ToolCallStart) if e.response in replies]
        results = [e.result for e in obs.of(ToolCallEnd) if e.response in replies and e.status == "ok"]
        starts = [e.t for e in obs.of(PlaybackStart) if e.response in replies]
        rows.append(
            {
                "say": turn.say,
                "heard": obs.heard_text(utterances),
                "reply": obs.reply_text(replies),
                "calls": [{"name": c.name, "arguments": c.arguments} for c in calls],
                "tool_results": results,
                "v2v_ms": None if not starts or placed is None else round((starts[0] - placed.speech_end) * 1000),
            }
        )
    facts = score_facts(request, [r["reply"] for r in rows], [" ".join(r["tool_results"]) or None for r in rows])
    for row, turn, fact in zip(rows, request.turns, facts, strict=True):
        row["fact"] = fact
        row["tool"] = score_tool(turn, [(c["name"], _arguments(c["arguments"])) for c in row["calls"]])
        row["form"] = form_faults(row["reply"])
    return rows


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# -- the judge -----------------------------------------------------------------

# Worked examples, then the model's next token: the scenarios' judge (voice/scenario/runner.py) asks
# about a reply alone, and said "yes" to every reply here, nonsense too ("There is currently 164
# known Earths" to "How many continents are there?"). These pair questions with right and wrong answers.
ASKED = "Is the reply a correct answer to the question? Answer:"
# (question, reply, verdict): measured on 12 labelled replies of the two models, the 0.5B judge agreed on
# 8 this way and on 7 asked "sensible and right" (a stronger judge: --judge-url).
_EXAMPLES = (
    ("What is the capital of Italy?", "The capital of Italy is Rome.", "yes"),
    ("How many legs does a dog have?", "Dogs have 80 eyes on their legs and run at great speed.", "no"),
    ("Tell me a joke.", "Why did the cat sit on the computer? To keep an eye on the mouse.", "yes"),
    ("What time is it?", "The Eiffel Tower is 300 metres tall.", "no"),
    ("How are you today?", "I'm well, thank you! How can I help?", "yes"),
    ("What is ten plus five?", "Ten plus five is fifty-two.", "no"),
)


def _asked(question: str, reply: str) -> str:
    return f'Question: "{question}"\nReply: "{reply}"\n{ASKED}'


SENSE_EXAMPLES = "".join(f"{_asked(q, r)} {verdict}\n\n" for q, r, verdict in _EXAMPLES)


async def judge_sense(judge: LLM, rows: list[dict[str, Any]]) -> None:
    """Each turn's reply judged sensible and right for its question (the turn before as context)."""
    before = ""
    for row in rows:
        if row["reply"]:
            text = SENSE_EXAMPLES + before + _asked(row["say"], row["reply"])
            yes, no = await yes_and_no(judge, text)
            row["sense"] = yes > no
        else:
            row["sense"] = False  # nothing said is no answer
        before = f'(Said before: "{row["say"]}" / "{row["reply"]}")\n'


# -- the run -------------------------------------------------------------------


async def measure(
    configs: list[Config], requests: list[Request], judge_url: str | None, real_time: int = 0
) -> dict[str, Any]:
    """Every request on virtual time per configuration; the first ``real_time`` of them again on the
    wall clock, for the voice-to-voice the engines' speed gives (``v2v_real_ms`` beside ``v2v_ms``)."""
    engines = LoadedEngines()
    judge = None
    if judge_url:
        from llm.openai_http import OpenAIChatClient

        judge = OpenAIChatClient(judge_url)
    out: dict[str, Any] = {"configs": {}, "requests": {}}
    try:
        if judge is None:  # the largest bundled model judges every configuration's replies
            probe = Scenario("judge", ROOT, {"llm_model": judge_model()}, False, Person(), (Turn(text="-"),))
            judge = (await engines.get(agent_setup(probe)[1].engine)).llm
        for config in configs:
            t0 = time.monotonic()
            load_before = engines.load_s
            for request in requests:
                result = await run_scenario(scenario_of(request, config), engines)
                rows = turn_figures(request, result)
                await judge_sense(judge, rows)
                out["requests"].setdefault(request.id, {"category": request.category})[config.name] = rows
                _print_row(config, request, rows)
            for request in requests[:real_time]:  # the engines are warm: the virtual runs went first
                timed = turn_figures(request, await run_scenario(scenario_of(request, config), engines, real_time=True))
                for row, again in zip(out["requests"][request.id][config.name], timed, strict=True):
                    row["v2v_real_ms"] = again["v2v_ms"]
                print(f"{config.name:<14} {request.id:<26} real time: v2v {timed[-1]['v2v_ms']} ms", file=sys.stderr)
            out["configs"][config.name] = {
                "agent": config.agent,
                "tools": config.tools,
                "wall_s": round(time.monotonic() - t0 - (engines.load_s - load_before), 1),
            }
        out["cold_start_s"] = round(engines.load_s, 1)
        out["judge"] = judge_url or judge_model()
    finally:
        await engines.aclose()
        if judge_url and judge is not None:
            await judge.close()
    out["summary"] = {c.name: summary(c, requests, out["requests"]) for c in configs}
    return out


def _print_row(config: Config, request: Request, rows: list[dict[str, Any]]) -> None:
    last = rows[-1]
    marks = f"fact={last['fact']} tool={last['tool']} sense={last['sense']} form={','.join(last['form']) or '-'}"
    print(f"{config.name:<14} {request.id:<26} {marks}  {last['reply'][:90]!r}", file=sys.stderr, flush=True)


def summary(config: Config, requests: list[Request], scored: dict[str, Any]) -> dict[str, Any]:
    """One configuration's figures over every turn scored."""
    rows = [row for r in requests for row in scored[r.id][config.name]]

    def share(values: list[bool | None]) -> dict[str, Any]:
        kept = [v for v in values if v is not None]
        return {"right": sum(kept), "of": len(kept), "share": round(sum(kept) / len(kept), 3) if kept else None}

    per_category = {
        c: share([row["fact"] for r in requests if r.category == c for row in scored[r.id][config.name]])
        for c in CATEGORIES
    }
    both = [(row["sense"], row["fact"]) for row in rows if row["sense"] is not None and row["fact"] is not None]
    v2v = [row["v2v_ms"] for row in rows if row["v2v_ms"] is not None]
    real = [row["v2v_real_ms"] for row in rows if row.get("v2v_real_ms") is not None]
    return {
        "facts": share([row["fact"] for row in rows]),
        "facts_by_category": per_category,
        "tool_decisions": share([row["tool"] for row in rows]) if config.tools else None,
        "sensible": share([row["sense"] for row in rows]),
        "judge_agrees_with_rubric": share([s == f for s, f in both]),
        "form_faults": {k: sum(k in row["form"] for row in rows) for k in [*FORM_FAULTS, "long"]},
        "unanswered": sum(not row["reply"] for row in rows),
        "v2v_ms_p50": percentile(v2v, 0.5) if v2v else None,
        "v2v_ms_p95": percentile(v2v, 0.95) if v2v else None,
        "v2v_real_ms_p50": percentile(real, 0.5) if real else None,
        "v2v_real_turns": len(real),
        "turns": len(rows),
    }


def table(summaries: dict[str, dict[str, Any]]) -> str:
    def pct(s: dict[str, Any] | None) -> str:
        return "-" if not s or s["share"] is None else f"{100 * s['share']:.0f}% ({s['right']}/{s['of']})"

    out = [
        "| configuration | facts | tool decisions | sensible (judge) | judge = rubric | form faults | no reply"
        " | v2v p50 (ms, virtual) | v2v p50 (ms, real time) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in summaries.items():
        faults = sum(s["form_faults"].values())
        out.append(
            f"| {name} | {pct(s['facts'])} | {pct(s['tool_decisions'])} | {pct(s['sensible'])}"
            f" | {pct(s['judge_agrees_with_rubric'])} | {faults} | {s['unanswered']} | {s['v2v_ms_p50'] or '-'}"
            f" | {_real(s)} |"
        )
    out += ["", "| configuration | " + " | ".join(CATEGORIES) + " |", "|---|" + "---:|" * len(CATEGORIES)]
    for name, s in summaries.items():
        out.append(f"| {name} | " + " | ".join(pct(s["facts_by_category"][c]) for c in CATEGORIES) + " |")
    return "\n".join(out)


def _real(s: dict[str, Any]) -> str:
    return "-" if s.get("v2v_real_ms_p50") is None else f"{s['v2v_real_ms_p50']:.0f} ({s['v2v_real_turns']} turns)"


def main(argv: list[str] | None = None) -> int:
    ap = parser(__name__, description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"which of: {', '.join(CONFIGS)}")
    ap.add_argument("--categories", default=",".join(CATEGORIES), help="only these categories")
    ap.add_argument("--ids", default="", help="only these requests, by id")
    ap.add_argument("--per-category", type=int, default=0, help="at most N requests of each category (0: all)")
    ap.add_argument("--judge-url", default=None, help="a server that judges (default: the largest bundled model)")
    ap.add_argument("--real-time", type=int, default=0, help="the first N requests again in real time (v2v)")
    ap.add_argument("--out", default="docs/bench")
    ap.add_argument("--json-name", default="answers.json")
    args = ap.parse_args(argv)
    unknown = [c for c in args.configs.split(",") if c not in CONFIGS]
    if unknown:
        ap.error(f"unknown configuration {unknown[0]!r} (one of {', '.join(CONFIGS)})")
    configs = [CONFIGS[c] for c in args.configs.split(",")]
    wanted = set(args.categories.split(","))
    ids = set(filter(None, args.ids.split(",")))
    requests: list[Request] = []
    for c in CATEGORIES:
        if c in wanted:
            of = [r for r in REQUESTS if r.category == c and (not ids or r.id in ids)]
            requests += of[: args.per_category or None]
    if not requests:
        ap.error("no request chosen")
    print(f"{len(requests)} requests x {len(configs)} configurations", file=sys.stderr)
    out = asyncio.run(measure(configs, requests, args.judge_url, args.real_time))
    print(table(out["summary"]))
    print(f"\nengines loaded in {out['cold_start_s']} s (cold start, not counted)")
    path = Path(args.out) / args.json_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
