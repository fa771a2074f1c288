"""What offeval understood of a file: one frozen summary, rendered as text (``offeval validate``, ``offeval
dashboard FILE --check``) and as a Markdown table (the dashboard's Data page).

It says, for the loaded logs: sessions, days and experiments (and the columns they come from), the arms with
their labels and how the labels were mapped, the logging policy, every target policy and its kind (rank or
propensity), the default target policy and why, the rewards and why each was picked, every column left out
and why, with a hint where an ignored column looks meaningful (two labels splitting the sessions evenly →
probably the arm), the guesses a person should check and the questions still open.
:func:`reading_lines` renders a :class:`~offeval_core.reading.Reading` alone: what the browser shows when it
asks before loading.
"""

from __future__ import annotations

from dataclasses import dataclass

from offeval_core.log_schema import LOGGING_PROPENSITIES, POLICY_PREFIX, TARGET_PROPENSITY_PREFIX, Logs
from offeval_core.logs import LogSummary, summarize
from offeval_core.policies import TargetPolicies, target_policies
from offeval_core.reading import ColumnReading, Hint, Question, Reading
from offeval_core.sanitize import escape_markdown

__all__ = ["Understanding", "hint_action", "hint_text", "markdown_table", "question_action", "reading_lines",
           "understand"]

STYLES = ("cli", "form")


_WHAT = {"arm": "the A/B arm", "item_id": "the item id", "day": "the day", "experiment_id": "the experiment",
         "segment": "a segment", "rank__*": "a target policy's ranks"}


def hint_action(hint: Hint, style: str = "cli") -> str:
    """How to use the column a hint names, in the words of an interface: ``cli`` (the command line's options)
    or ``form`` (the Data page's column-mapping form).

    >>> from offeval_core.arm_values import ArmValues
    >>> hint_action(Hint("arm", "bucket", ("A", "B"), ArmValues("A", "B", how="guessed")))
    'map it with --map arm=bucket --arms control=A,treatment=B'
    """
    if style == "form":
        if hint.field == "rank__*":
            return "enter a pattern for it under Policy columns"
        arms = ""
        if hint.field == "arm":
            arms = (f" and enter the arm labels {hint.arms.text()}" if hint.arms else
                    " and enter which label is control and which treatment (control=…,treatment=…)")
        return f"choose {hint.column} as {hint.field} in the column mapping{arms}"
    if hint.field == "rank__*":
        return f"map it with --map rank__<policy>={hint.column} (or a pattern rank__*=<prefix>*)"
    arms = ""
    if hint.field == "arm":
        arms = f" --arms {hint.arms.text()}" if hint.arms else " --arms control=<label>,treatment=<label>"
    return f"map it with --map {hint.field}={hint.column}{arms}"


def hint_text(hint: Hint, style: str = "cli") -> str:
    """``probably <what>: <how to map it>`` for an ignored column that looks meaningful.

    >>> hint_text(Hint("item_id", "asset"))
    'probably the item id: map it with --map item_id=asset'
    """
    return f"probably {_WHAT.get(hint.field, hint.field)}: {hint_action(hint, style)}"


def question_action(q: Question, style: str = "cli") -> str:
    """How to answer a question in an interface's words."""
    if q.topic == "rewards":
        return ("name the rewards with " + " ".join(f"--reward {o}" for o in q.options) if style == "cli" else
                "choose the rewards under Reward columns and apply the mapping")
    if q.topic == "arm" and q.hint is not None:
        decline = "say --arms none" if style == "cli" else "leave arm as it is and enter none as the arm labels"
        return f"if {q.hint.column} is the arm, {hint_action(q.hint, style)}; if not, {decline}"
    return ""


_HOW = {"given": "mapped by you", "pattern": "a pattern", "guessed": "guessed from its name"}


def _column_of(reading: Reading | None, field: str) -> str:
    """``column visit, guessed from its name`` for a schema field ('' when the reading has no such column)."""
    col = next((c for c in reading.columns if c.role == field), None) if reading is not None else None
    if col is None:
        return ""
    how = _HOW.get(col.how, "")
    return f"column {col.column}{', ' + how if how else ''}"


def _column_note(reading: Reading | None, columns, field: str) -> str:
    if reading is not None and field == "session_id" and reading.sessions_from_rows:
        return " (no session column: each row is one session, a bandit round)"
    col = next((c for c in reading.columns if c.role == field), None) if reading is not None else None
    if col is None or (col.column == field and col.how not in _HOW):
        return ""
    return f" ({_column_of(reading, field)})"


def _group(cols: list[ColumnReading]) -> list[tuple[str, ColumnReading]]:
    """Ignored columns with the same reason and no hint, four or more: one entry naming the first two."""
    out: list[tuple[str, ColumnReading]] = []
    by_why: dict[str, list[ColumnReading]] = {}
    for c in cols:
        by_why.setdefault(c.why if c.hint is None else f"\0{c.column}", []).append(c)
    for group in by_why.values():
        if len(group) >= 4:
            out.append((f"{group[0].column}, {group[1].column}, … ({len(group)} columns)", group[0]))
        else:
            out += [(c.column, c) for c in group]
    return out


def _question_text(q: Question, style: str) -> str:
    action = question_action(q, style)
    return f"{q.text}: {action}" if action else q.text


def reading_lines(reading: Reading, columns=None, *, style: str = "cli", fields: bool = False
                  ) -> list[tuple[str, str]]:
    """(topic, text) lines of a reading alone: with ``fields`` the schema fields and their columns first (what
    is shown before the logs are loaded), then the rewards and why, ignored columns and why, guesses and
    questions."""
    lines: list[tuple[str, str]] = []
    if fields:
        if reading.sessions_from_rows:
            lines.append(("session_id", "each row (no session column: a bandit round per row)"))
        policies = [c for c in reading.columns if c.policy]
        for c in reading.columns:
            if c.role not in ("reward", "ignored") and not c.policy:
                lines.append((c.role, f"column {c.column} ({c.why})"))
        if policies:
            shown = ", ".join(f"{c.policy} = {c.column}" for c in policies[:12])
            more = f", … ({len(policies)} policies)" if len(policies) > 12 else ""
            lines.append(("target policies", shown + more))
    rewards = [c for c in reading.columns if c.role == "reward"]
    if rewards:
        by_why: dict[str, list[str]] = {}
        for c in rewards:
            by_why.setdefault(c.why, []).append(c.column)
        lines.append(("rewards", "; ".join(f"{', '.join(names)} ({why})" for why, names in by_why.items())))
    ignored = reading.ignored
    if ignored:
        for label, c in _group(list(ignored)):
            text = f"{label}: {c.why}"
            if c.hint is not None:
                text += f" — {hint_text(c.hint, style)}"
            lines.append(("ignored column", text))
    else:
        lines.append(("ignored columns", "none"))
    lines += [("guessed", g) for g in reading.guesses]
    lines += [("question", _question_text(q, style)) for q in reading.questions]
    return lines


def markdown_table(lines: list[tuple[str, str]], title: str = "what offeval understood") -> str:
    """(topic, text) lines as a two-column Markdown table; every cell escaped, so names show as text.

    >>> print(markdown_table([("rewards", "**x** (named like a reward)")]))
    | | what offeval understood |
    |---|---|
    | **rewards** | \\*\\*x\\*\\* (named like a reward) |
    """
    rows = [f"| | {title} |", "|---|---|"]
    rows += [f"| **{escape_markdown(t)}** | {escape_markdown(x)} |" for t, x in lines]
    return "\n".join(rows)


@dataclass(frozen=True)
class Understanding:
    """What offeval understood of one file (module docstring); ``lines`` are (topic, text) pairs with the
    user's column names as plain text, rendered by :meth:`to_text` and :meth:`to_markdown`."""

    source: str
    summary: LogSummary
    reading: Reading | None
    targets: TargetPolicies
    columns: dict

    def lines(self, style: str = "cli") -> list[tuple[str, str]]:
        s, t, cols = self.summary, self.targets, self.columns
        days = f"{len(s.days)} ({s.days[0]} … {s.days[-1]})" if s.days else "0"
        exps = f"{len(s.experiments)} ({', '.join(s.experiments[:8])}{' …' if len(s.experiments) > 8 else ''})"
        out = [
            ("rows (impressions)", f"{s.rows:,}"),
            ("sessions", f"{s.sessions:,}{_column_note(self.reading, cols, 'session_id')}"),
            ("days", days + (_column_note(self.reading, cols, "day") if "day" in cols or self._has("day")
                             else " (no day column: one day)")),
            ("experiments", exps + (_column_note(self.reading, cols, "experiment_id")
                                    if "experiment_id" in cols or self._has("experiment_id")
                                    else " (no experiment column: one experiment)")),
            ("arms", self._arms_text()),
            *((label, _column_of(self.reading, field)) for label, field in (("items", "item_id"), ("segments", "segment"))
              if self._has(field)),
            ("logging policy", self._logging_text()),
            ("target policies", self._policies_text()),
            ("default target", f"{t.default} ({t.reason})" if t.default else "none (only the logging policy)"),
        ]
        reading = reading_lines(self.reading, cols, style=style) if self.reading is not None else []
        out += [x for x in reading if x[0] == "rewards"]
        out += [
            ("reward rate per impression", ", ".join(f"{r} {v:.2%}" for r, v in s.reward_rates.items())),
            ("sessions with ≥ 1 reward", ", ".join(f"{r} {v:.1%}" for r, v in s.sessions_with_reward.items())),
            ("session length", s.length_text()),
        ]
        out += [x for x in reading if x[0] != "rewards"]
        out += [("note", n) for n in s.notes]
        return out

    def _has(self, field: str) -> bool:
        return self.reading is not None and any(c.role == field for c in self.reading.columns)

    def _arms_text(self) -> str:
        s, r = self.summary, self.reading
        counts = ", ".join(f"{a} {n:,} session{'s' if n != 1 else ''}" for a, n in s.arms.items())
        if r is None or r.arm_column is None:
            why = "you said the file has no arm column" if r is not None and r.arms_declined else "no arm column"
            return f"{counts} ({why}: every session was logged by the logging policy)"
        col = next((c for c in r.columns if c.role == "arm"), None)
        how = {"given": "mapped by you", "guessed": "guessed from its name"}.get(col.how if col else "", "")
        v = r.arm_values
        labels = {"schema": "the schema's labels", "guessed": "a common pair, guessed",
                  "given": "labels mapped by you"}.get(v.how, "") if v else ""
        return (f"{counts} (column {r.arm_column}{', ' + how if how else ''}; "
                f"{v.describe() if v else ''}{', ' + labels if labels else ''})")

    def _logging_text(self) -> str:
        rank_col = self.columns.get("rank", "rank")
        offline = "the control arm's sessions" if "control" in self.summary.arms and len(self.summary.arms) > 1 \
            else "every session"
        text = f"the logged ranks (column {rank_col}) on {offline}"
        props = [self.columns.get(c, c) for c in LOGGING_PROPENSITIES if self._has(c)]
        if props:
            text += f", with the logging propensities of column {', '.join(props)}"
        if self.targets.logging:
            text += f"; the target polic{'y' if len(self.targets.logging) == 1 else 'ies'} " \
                    f"{', '.join(self.targets.logging)} {'is' if len(self.targets.logging) == 1 else 'are'} the same"
        return text

    def _policies_text(self) -> str:
        t = self.targets
        if not t.all:
            return ("none (no rank__<policy> column, and no target_propensity__<policy> column next to a "
                    "logging_propensity column)")
        both = set(t.rank) & set(t.propensity)
        parts = [f"{p} ({t.kind(p)}{'; its propensities unused' if p in both else ''}"
                 f"{', the logging policy' if p in t.logging else ''})" for p in t.all[:12]]
        more = f", … ({len(t.all)} policies)" if len(t.all) > 12 else ""
        cols = []
        for prefix, names in ((POLICY_PREFIX, t.rank), (TARGET_PROPENSITY_PREFIX, t.propensity)):
            users = [self.columns.get(prefix + p, prefix + p) for p in names]
            heads = {u[: len(u) - len(p)] for u, p in zip(users, names, strict=True) if u.endswith(p)}
            if len(users) > 1 and len(heads) == 1 and all(u.endswith(p) for u, p in zip(users, names, strict=True)):
                cols.append(f"{heads.pop()}<policy>")
            else:
                cols += users
        return ", ".join(parts) + more + f"; from column{'s' if len(t.all) > 1 else ''} {', '.join(cols)}"

    def to_text(self) -> str:
        """The command line's rendering (``offeval validate``, ``offeval dashboard FILE --check``)."""
        head = f"{self.source}: valid ranking logs"
        body = [f"  {topic + ':':<19} {text}" for topic, text in self.lines("cli")]
        return "\n".join([head, *body])

    def to_markdown(self) -> str:
        """The Data page's rendering: a two-column Markdown table, every name escaped."""
        return markdown_table(self.lines("form"))

    def to_dict(self) -> dict:
        return {**self.summary.to_dict(), "understood": [{"topic": t, "text": x} for t, x in self.lines("cli")],
                "default_target_policy": self.targets.default,
                "target_policies": [{"name": p, "kind": self.targets.kind(p), "logging": p in self.targets.logging}
                                    for p in self.targets.all],
                "questions": [q.text for q in (self.reading.questions if self.reading else ())]}


def understand(logs: Logs, *, summary: LogSummary | None = None) -> Understanding:
    """What offeval understood of validated ``logs`` (``summary`` when already computed)."""
    return Understanding(source=logs.source, summary=summary or summarize(logs), reading=logs.reading,
                         targets=target_policies(logs), columns=dict(logs.columns))
