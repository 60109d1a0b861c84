"""A scripted world for MagicBeanStalk tests: one loopback OpenAI-compatible server that
plays the teacher (JSON replies) and every student and the policy (``n`` boxed answers).

Questions name what they are, so the script can answer them: a seed is ``seed:<name>``
(answer 10), a subproblem appends ``/k`` (answer 1), a harder leaf variant is
``H(<q>)#<seed>`` (answer 3), a synthetic parent is ``P[<children>]#<seed>`` (answer 7),
a variation ``V(<q>)#<seed>`` (answer 5). The request's ``seed`` makes retries and trials
differ, as a real teacher's sampling would.

Students answer with the accuracy :class:`World` assigns to (model, kind of question,
with or without in-context examples); the ``plain`` template is used, so a prompt with a
blank line in it carries in-context examples.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

ANSWERS = {"seed": "10", "sub": "1", "leaf": "3", "parent": "7", "variation": "5"}


def kind_of(question: str) -> str:
    q = question.strip()
    if q.startswith("H("):
        return "leaf"
    if q.startswith("P["):
        return "parent"
    if q.startswith("V("):
        return "variation"
    if "/" in q:
        return "sub"
    return "seed"


@dataclass
class World:
    """Knobs of the scripted teacher and students.

    acc[(model, kind)]: correct answers out of 8 for a student or the policy (default 0);
    gain[model]: extra correct answers with in-context examples;
    no_trace: seed names whose every trace is wrong; garbage: seed names the teacher answers
    with broken JSON; atomic: questions the teacher refuses to split.
    """

    acc: dict = field(default_factory=dict)
    gain: dict = field(default_factory=dict)
    no_trace: set = field(default_factory=set)
    garbage: set = field(default_factory=set)
    atomic: set = field(default_factory=set)
    k: int = 2
    sub_answer: str = ANSWERS["sub"]
    calls: Counter = field(default_factory=Counter)

    # -- the teacher ---------------------------------------------------------------------
    def teacher(self, body: dict) -> str:
        user = body["messages"][-1]["content"]
        seed = body.get("seed", 0)
        q = _field(user, "Problem: ")
        if user.startswith("Solve the problem below"):
            self.calls["solve"] += 1
            name = q.split(":", 1)[-1]
            if name in self.garbage:
                return "this is not JSON {"
            ans = "999" if name in self.no_trace else ANSWERS["seed"]
            return json.dumps({"solution": f"worked. \\boxed{{{ans}}}", "answer": ans})
        if user.startswith("Here is a problem with a verified solution"):
            self.calls["decompose"] += 1
            if q in self.atomic:
                return json.dumps({"subproblems": []})
            subs = [{"question": f"{q}/{i}", "solution": f"\\boxed{{{self.sub_answer}}}", "answer": self.sub_answer}
                    for i in range(self.k)]
            return json.dumps({"subproblems": subs})
        if user.startswith("Here is an easy problem"):
            self.calls["harder"] += 1
            return _item(f"H({q})#{seed}", "leaf")
        if user.startswith("An original problem was built"):
            self.calls["compose"] += 1
            kids = re.findall(r"^Problem: (.*)$", user.split("Now here are new, harder subproblems:")[1], re.M)
            return _item(f"P[{'|'.join(kids)}]#{seed}", "parent")
        if user.startswith("Here is a problem with its solution"):
            self.calls["vary"] += 1
            return _item(f"V({q})#{seed}", "variation")
        raise AssertionError(f"unscripted teacher prompt: {user[:80]!r}")

    # -- students and policy ---------------------------------------------------------------
    def student(self, body: dict) -> list[str]:
        model = body["model"]
        n = int(body.get("n") or 1)
        text = body["messages"][-1]["content"]
        incontext = "\n\n" in text
        question = text.split("\n\n")[-1]
        kind = kind_of(question)
        right = self.acc.get((model, kind), 0) + (self.gain.get(model, 0) if incontext else 0)
        right = max(0, min(8, right))
        # which of the n samples are right depends on the request seed, so reruns repeat
        start = int(body.get("seed") or 0) % 8
        return [f"\\boxed{{{ANSWERS[kind] if (start + j) % 8 < right else 'wrong'}}}" for j in range(n)]

    def __call__(self, body: dict):
        if body.get("model") == "teacher":
            return self.teacher(body)
        return self.student(body)


def _field(text: str, prefix: str) -> str:
    m = re.search("^" + re.escape(prefix) + "(.*)$", text, re.M)
    return m.group(1).strip() if m else ""


def _item(question: str, kind: str) -> str:
    return json.dumps({"question": question, "solution": f"so \\boxed{{{ANSWERS[kind]}}}", "answer": ANSWERS[kind]})
