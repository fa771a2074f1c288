"""Data: choose the demo, upload CSV / Parquet (with a column mapping) or a moments file (``offeval reduce``),
or simulate a world; validation report, data summary and the learnt position-bias curve next to log2 and
exponential (for a moments file: its grid, groups and settings)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import data, served, ui
from offeval_core import mapping as column_mapping
from offeval_core.arm_values import parse_arms
from offeval_core.errors import InputError, NeedsAnswers
from offeval_core.logs import KNOWN
from offeval_core.sanitize import escape_markdown
from offeval_core.understanding import markdown_table, question_action, reading_lines

c = ui.ctx()
ss = st.session_state
st.title("Data")
st.caption("Ranking logs: one row per viewed impression (session_id, rank, rewards, optional day, experiment_id, "
           "arm, segment, rank__<policy>). Uploaded data stays on this machine; it only passes through a "
           "temporary directory that is deleted right after reading.")
NONE = "(not in my file)"


def _use(choice: str) -> None:
    ss["w_dataset"] = choice


def _on_upload() -> None:
    f = ss.get("w_upload")
    ss.pop("upload_error", None)
    if f is None:
        return
    buf = f.getbuffer()
    sha = data.content_key(buf)
    data.keep_upload(sha, buf)
    try:
        if data.upload_moments(sha, f.name, buf) is not None:
            ss["upload_info"] = {"sha": sha, "name": f.name, "mapping": {}, "kind": "moments"}
            ss["w_dataset"] = "upload"
            return
        data.upload_raw(sha, f.name, buf)
    except InputError as exc:  # every loader failure (unreadable, over a limit, invalid moments)
        ss["upload_error"] = exc
        return
    # common names (visit, pos, variant…) are guessed at once, as the command line does; the form shows them
    ss["upload_info"] = {"sha": sha, "name": f.name, "mapping": {"guess": "1"}}
    ss.pop("_map_for", None)
    ss["w_dataset"] = "upload"


def _on_simulate() -> None:
    switches = [s for s in data.SIM_SWITCHES if ss.get(f"w_sim_{s}")]
    depth = ss.get("w_sim_support") or None
    ss["sim_spec"] = data.sim_spec(ss.get("w_sim_preset", "small"), int(ss.get("w_sim_seed", 1)),
                                   sessions=int(ss.get("w_sim_sessions") or 0) or None,
                                   days=int(ss.get("w_sim_days") or 0) or None, switches=switches,
                                   support_depth=int(depth) if depth else None)
    ss["w_dataset"] = "sim"


def _form_mapping(raw: pd.DataFrame) -> tuple[dict[str, str], list[str], str, str]:
    """(mapping with patterns expanded, rewards, arm labels, problem) from the mapping widgets' current values."""
    mapping = {}
    for name in KNOWN:
        chosen = ss.get(f"w_map_{name}")
        if chosen and chosen != NONE and chosen != name:
            mapping[name] = chosen
    arms = (ss.get("w_map_arms") or "").strip()
    try:
        parse_arms(arms, what="Arm labels")
    except InputError as exc:
        return mapping, [], arms, f"{exc} (e.g. control=A,treatment=B, or none)."
    pattern = (ss.get("w_map_policies") or "").strip()
    if pattern:
        if pattern.count("*") != 1:
            return mapping, [], arms, ("The policy columns pattern needs exactly one *, standing for the policy "
                                       f"name (e.g. pos_*); got “{pattern}”.")
        mapping["rank__*"] = pattern
    try:
        concrete = column_mapping.expand_mapping(raw.columns, mapping)
    except ValueError:
        return mapping, [], arms, f"No column matches the policy columns pattern “{pattern}”."
    return concrete, list(ss.get("w_map_rewards") or []), arms, ""


def _last_reading(info: dict):
    """The reading of this upload's last load: the loaded logs', or the one a pending question carries."""
    err = ss.get("_load_error")
    if isinstance(err, NeedsAnswers):
        return err.reading
    ds = c.dataset
    if ds is not None and not ds.is_moments and ds.key.startswith(f"upload:{info['sha']}|"):
        return ds.logs.reading
    return None


def _init_mapping_widgets(raw: pd.DataFrame, info: dict) -> None:
    """Fill the mapping widgets once per upload: the applied mapping, else guesses for common names, the
    rewards and arm labels offeval understood."""
    if ss.get("_map_for") == info["sha"]:
        return
    ss["_map_for"] = info["sha"]
    cols = [str(x) for x in raw.columns]
    current = {k: v for k, v in info.get("mapping", {}).items() if k not in ("reward", "arms", "guess")}
    guessed = column_mapping.guess_mapping(raw, current)
    merged = {**guessed, **current}
    for name in KNOWN:
        ss[f"w_map_{name}"] = merged.get(name, name if name in cols else NONE)
    policy_cols = [v for k, v in merged.items() if k.startswith("rank__")]
    pattern = ""
    if policy_cols:
        names = [k[len("rank__"):] for k, v in merged.items() if k.startswith("rank__")]
        prefixes = {c[: len(c) - len(n)] for c, n in zip(policy_cols, names, strict=True) if c.endswith(n)}
        pattern = prefixes.pop() + "*" if len(prefixes) == 1 else ""
    ss["w_map_policies"] = pattern
    reading = _last_reading(info)
    chosen = info.get("mapping", {}).get("reward")
    if chosen:
        ss["w_map_rewards"] = chosen.split(",")
    elif reading is not None:
        ss["w_map_rewards"] = [r for r in reading.rewards if r in cols]
    else:
        used = set(merged.values()) | set(KNOWN)
        numeric = [c for c in cols if c not in used and not c.startswith(("rank__", "target_propensity__"))
                   and pd.api.types.is_numeric_dtype(raw[c])]
        ranky = set(column_mapping.rank_like_rewards(raw, numeric))
        ss["w_map_rewards"] = [c for c in numeric if c not in ranky]
    arms = info.get("mapping", {}).get("arms", "")
    if not arms and reading is not None and reading.arm_values is not None and reading.arm_values.how != "schema":
        arms = reading.arm_values.text()
    ss["w_map_arms"] = arms


def _on_mapping(raw_key: tuple[str, str]) -> None:
    raw = data.upload_raw(*raw_key)
    concrete, rewards, arms, problem = _form_mapping(raw)
    if problem:
        ss["_map_problem"] = problem
        return
    ss.pop("_map_problem", None)
    info = dict(ss.get("upload_info") or {})
    mapping = dict(concrete)
    if rewards:
        mapping["reward"] = ",".join(rewards)
    if arms:
        mapping["arms"] = arms
    info["mapping"] = mapping
    ss["upload_info"] = info
    ss["w_dataset"] = "upload"


def _show_questions(exc: NeedsAnswers) -> None:
    """What the file leaves open, how to answer it in the form, and what was understood so far; nothing is
    computed until the mapping is applied."""
    lines = [f"- {escape_markdown(q.text)}: {escape_markdown(question_action(q, 'form'))}" for q in exc.questions]
    st.warning("**Before anything is computed, please confirm in the column mapping below:**\n" + "\n".join(lines),
               icon=":material/help:")
    with st.expander("What offeval understood so far", expanded=True):
        st.markdown(markdown_table([x for x in reading_lines(exc.reading, style="form", fields=True)
                                    if x[0] != "question"]))


def _mapping_form(raw: pd.DataFrame, info: dict, *, expanded: bool) -> None:
    """The column-mapping form: schema fields, a policy-columns pattern, the reward picker, and a live preview
    of what each column becomes; applied with one button."""
    cols = [str(x) for x in raw.columns]
    _init_mapping_widgets(raw, info)
    err = ss.get("_load_error") if ss.get("w_dataset") == "upload" else None
    state = f"{info['sha']}|{type(err).__name__ if err is not None else ''}"
    if "w_map_open" not in ss or ss.get("_map_open_for") != state:
        ss["w_map_open"] = expanded  # open when the file needs a mapping or an answer; then as the user leaves it
        ss["_map_open_for"] = state
    with st.expander("Column mapping", key="w_map_open", on_change="rerun", icon=":material/swap_horiz:"):
        st.caption("Which of your columns holds each schema field (common names such as visit, pos, variant, "
                   "date and test are guessed), which columns are the target policies' ranks, and which are "
                   "rewards. The preview updates as you choose; **Apply mapping** reloads the file.")
        grid = st.columns(4)
        for i, name in enumerate(KNOWN):
            extra = [column_mapping.EACH_ROW] if name == "session_id" else []
            grid[i % 4].selectbox(name + (" *" if name in ("session_id", "rank") else ""), [NONE, *extra, *cols],
                                  key=f"w_map_{name}",
                                  help=("“(each row)”: no session column, each row is one session (a bandit round)"
                                        if name == "session_id" else None))
        a, b = st.columns([1, 2])
        a.text_input("Policy columns (pattern)", key="w_map_policies", placeholder="e.g. pos_*",
                     help="Columns holding the rank each candidate policy would give the item; * stands for "
                          "the policy's name (pos_* makes pos_treatment the policy 'treatment'). Columns "
                          "already named rank__<policy> need no pattern.")
        a.text_input("Arm labels", key="w_map_arms", placeholder="e.g. control=A,treatment=B",
                     help="Which label of the arm column is the control arm and which the treatment arm: "
                          "control=<label>,treatment=<label>. Empty: control/treatment or a common pair (A/B, 0/1, "
                          "control/test, baseline/variant, off/on) is recognised. none: the file has no arm column.")
        concrete, _, _, problem = _form_mapping(raw)
        used = set(concrete.values())
        numeric = [c for c in cols if c not in used and c not in KNOWN and not c.startswith(("rank__",
                   "target_propensity__")) and pd.api.types.is_numeric_dtype(raw[c])]
        if any(r not in numeric for r in ss.get("w_map_rewards") or []):
            ss["w_map_rewards"] = [r for r in ss["w_map_rewards"] if r in numeric]
        b.multiselect("Reward columns", numeric, key="w_map_rewards",
                      help="Numeric columns whose mean the offline metrics estimate (clicks, likes, watch time)")
        if problem:
            st.error(problem, icon=":material/error:")
        ranky = column_mapping.rank_like_rewards(raw, ss.get("w_map_rewards") or [])
        if ranky:
            st.warning(f"{', '.join(ranky)} look like ranks, not rewards: whole numbers from 1 on every row, never "
                       "0. If they are the ranks a candidate policy would give, enter their pattern under "
                       "Policy columns and remove them from the rewards.", icon=":material/warning:")
        inverse = {v: k for k, v in concrete.items()}
        rewards = set(ss.get("w_map_rewards") or [])
        reading = _last_reading(info)

        def role(col: str) -> str:
            k = inverse.get(col, col if col in KNOWN or col.startswith("rank__") else None)
            if k and k.startswith("rank__"):
                return f"target policy “{k[len('rank__'):]}”"
            if k:
                return k
            if col in rewards:
                return "reward"
            seen = reading.of(col) if reading is not None else None
            return f"not used: {seen.why}" if seen is not None and seen.role == "ignored" else "not used"

        preview = pd.DataFrame({"your column": cols, "becomes": [role(x) for x in cols]})
        n_pol = sum(r.startswith("target policy") for r in preview["becomes"])
        st.markdown(f"**Preview:** {n_pol} target polic{'y' if n_pol == 1 else 'ies'}, "
                    f"{len(rewards)} reward column(s)")
        st.dataframe(preview, hide_index=True, key="table_map_preview", height=min(38 + 35 * len(cols), 360))
        st.button("Apply mapping", key="w_map_apply", type="primary", on_click=_on_mapping,
                  args=((info["sha"], info["name"]),), disabled=bool(problem))
        if ss.get("_map_problem"):
            st.error(ss["_map_problem"], icon=":material/error:")
        st.caption("First rows of the file:")
        st.dataframe(raw.head(5), hide_index=True, key="table_raw_head")


SOURCES = {"demo": "Bundled demo", "upload": "Upload a file", "sim": "Simulate a world"}


def _sources() -> dict[str, str]:
    """The Source choices: a dashboard started on a file (``offeval dashboard FILE``) offers that file first."""
    if not served.served():
        return SOURCES
    return {"file": f"Served file ({served.served_name()})", **SOURCES}


def _loader() -> None:
    """Where the data comes from: the served file, the demo, an upload (with the column mapping) or a simulated
    world."""
    sources = _sources()
    if ss.get("w_source") not in sources or ss.get("_source_for") != ss.get("w_dataset"):
        ss["w_source"] = ss.get("w_dataset", "demo") if ss.get("w_dataset") in sources else next(iter(sources))
    ss["_source_for"] = ss.get("w_dataset")
    source = st.segmented_control("Source", list(sources), key="w_source", format_func=sources.get, required=True)
    if source == "file":
        if ss.get("w_dataset") == "file":
            st.caption(f"In use: **{escape_markdown(served.served_name())}**, the file this dashboard was started on "
                       "(`offeval dashboard FILE`).")
        else:
            st.markdown(f"**{escape_markdown(served.served_name())}**, the file this dashboard was started on.")
            st.button("Use the served file", key="w_use_file", on_click=_use, args=("file",), type="primary")
    if source == "demo":
        loaded = c.dataset is not None and c.dataset.key.startswith("demo:")
        # what it holds is read from the loaded demo (another demo directory, or the in-memory world before
        # `make data`, differs from the committed one); not loaded yet: said without numbers
        about = (escape_markdown(data.demo_description(c.dataset.summary, ground_truth=c.dataset.ground_truth
                                                       is not None)) if loaded
                 else "A simulated short-video feed with several A/B tests, candidate rankers and the exact ground "
                      "truth.") + " Written by `make data`."
        if ss.get("w_dataset") == "demo":  # in use: one line
            st.caption(f"In use. {about}")
        else:
            st.markdown(about)
            # beside a served file the demo stays reachable, but it is not the page's main action
            st.button("Use the demo data", key="w_use_demo", on_click=_use, args=("demo",),
                      type="secondary" if served.served() else "primary")

    if source == "upload":
        st.file_uploader("CSV (comma or tab separated, optionally .gz) or Parquet logs, or a moments file written "
                         "by `offeval reduce LOGS --out moments.parquet`", key="w_upload",
                         type=["csv", "tsv", "txt", "gz", "parquet", "pq"], on_change=_on_upload,
                         help="Read in place from the upload; written only to a private temporary directory "
                              "while the reader runs, then deleted.")
        err = ss.get("upload_error")
        if err is not None:
            ui.show_error(err, context="Upload")
        info = ss.get("upload_info")
        if info:
            load_error = ss.get("_load_error") if ss.get("w_dataset") == "upload" and c.dataset is None else None
            if isinstance(load_error, NeedsAnswers):
                _show_questions(load_error)
            elif load_error is not None:
                ui.show_error(load_error, context="Validation")
            elif ss.get("w_dataset") == "upload":
                st.success(f"{info['name']} is valid and loaded.", icon=":material/check_circle:")
            else:
                st.button(f"Use {info['name']}", key="w_use_upload", on_click=_use, args=("upload",))
            try:
                raw = None if info.get("kind") == "moments" else data.upload_raw(info["sha"], info["name"])
            except LookupError:
                raw = None
            if raw is not None:
                _mapping_form(raw, info, expanded=load_error is not None or not c.dataset
                              or not c.dataset.policies)

    if source == "sim":
        with st.form("sim_form"):
            a, b, d = st.columns(3)
            a.selectbox("Preset", data.SIM_PRESETS, key="w_sim_preset",
                        help="small: 3 tests × 3 days × 200 sessions per arm and day (seconds); demo: the bundled "
                             "world (20 tests × 7 days × 1000 sessions; about half a minute)")
            b.number_input("Seed", min_value=0, max_value=data.SIM_LIMITS["seed"][1], value=1, step=1,
                           key="w_sim_seed")
            d.number_input("Sessions per arm and day (0 = preset)", min_value=0,
                           max_value=data.SIM_LIMITS["sessions"][1], value=0, step=100, key="w_sim_sessions")
            a.number_input("Days (0 = preset)", min_value=0, max_value=data.SIM_LIMITS["days"][1], value=0,
                           key="w_sim_days")
            b.number_input("Support depth (0 = full support)", min_value=0, max_value=data.SIM_LIMITS["support"][1],
                           value=0, key="w_sim_support", help="Breaks Asm. 5: items below this rank are never shown")
            d.markdown("**Break an assumption (KDD'24 Sec. 4)**")
            d.checkbox("Cascade browsing (Asm. 2)", key="w_sim_cascade")
            d.checkbox("Reward interactions across ranks (Asm. 3)", key="w_sim_reward_interactions")
            d.checkbox("Context-dependent position bias (Asm. 2)", key="w_sim_contextual_position_bias")
            st.form_submit_button("Simulate", type="primary", on_click=_on_simulate)
        if ss.get("sim_spec"):
            st.caption(f"Current simulation: `{ss['sim_spec']}`")


PRESENTING = c.present and c.dataset is not None
if not PRESENTING:  # presenting loaded data: the chart first, the loader folded at the bottom
    _loader()
    st.divider()
if c.dataset is None and isinstance(ss.get("_load_error"), NeedsAnswers):
    st.info("Nothing is computed until the question(s) above are answered in the column mapping.",
            icon=":material/hourglass_empty:")
    ui.end_page()
if c.dataset is None:
    st.error(f"No valid data is loaded. {escape_markdown(c.problem)} Use one of the tabs above.", icon=":material/error:")
    ui.end_page()

ds = c.dataset
if ds.is_moments:
    mo, meta = ds.file_moments, ds.meta or {}
    st.subheader(f"Moments file — {escape_markdown(ds.label)}")
    st.info(escape_markdown(ds.note), icon=":material/info:")
    on = mo.online
    m = st.columns(5)
    m[0].metric("Sessions", f"{int(on.loc[on['reward'] == on['reward'].iloc[0], 'n'].sum()):,}" if len(on) else "0")
    m[1].metric("Days", len(ds.days))
    m[2].metric("Experiments", len(ds.experiments))
    m[3].metric("Target policies", len(ds.policies))
    m[4].metric("Moment rows", f"{len(mo.offline):,}")
    g = mo.grid
    grid = pd.DataFrame({"field": ["rewards", "policies", "discounts D", "exposure models D0", "clip values m",
                                   "nDCG when iDCG = 0"],
                         "values": [", ".join(g.rewards), ", ".join(g.policies),
                                    ", ".join(f"{d} ({mo.discount_labels.get(d, d)})" for d in g.discounts),
                                    ", ".join(g.exposures), ", ".join(ui.clip_label(x) for x in g.clips),
                                    g.ndcg_rule]})
    st.markdown("**Variant grid** (the sidebar offers only these)")
    ui.show_table(grid, key="moments_grid", name="moments_grid")
    settings = {k: ("" if v is None else str(v)) for k, v in (meta.get("settings") or {}).items()}
    if settings:
        st.markdown("**How the file was computed**")
        ui.show_table(pd.DataFrame({"setting": list(settings), "value": list(settings.values())}),
                      key="moments_settings", name="moments_settings")
    ui.raw_logs_notice("The learnt position-bias curve (session survival per rank)")
    ui.end_page()
s = ds.summary
if not c.present:
    st.subheader(f"Validation report — {escape_markdown(ds.label)}")
    if ds.note:
        st.info(escape_markdown(ds.note), icon=":material/info:")
st.success(f"{escape_markdown(ds.label)}: valid logs, {s.sessions:,} sessions and {s.rows:,} impressions"
           + ("." if c.present else " (no missing columns, duplicate (session, rank) pairs, bad ranks, NaN rewards or "
                                    "unmapped arm labels)."), icon=":material/check_circle:")
understood = data.understanding(ds.key)
flagged = [c for c in (understood.reading.ignored if understood.reading else ()) if c.hint is not None]
if flagged:
    st.warning("Ignored column(s) that look meaningful: "
               + "; ".join(escape_markdown(f"{c.column} ({c.why})") for c in flagged)
               + ". See **What offeval understood** below and map them in the column mapping if they are.",
               icon=":material/warning:")


BANDIT_CURVE = ("No position-bias curve: each session is one logged impression (a bandit round), so how far users "
                "look down a ranking cannot be learnt from these logs — a learnt curve would only count the rounds "
                "logged at each position.")


def _curve() -> None:
    """The learnt position-bias curve next to 1/log₂(r+1) and p^(r−1), with its headline and options; none on a
    log of one impression per session, where the 'share of sessions reaching rank r' counts the rounds logged at
    a position ≥ r, not how far users look."""
    if s.rows == s.sessions:
        st.info(BANDIT_CURVE, icon=":material/info:")
        return
    with ui.guarded("Position-bias curve"):
        with ui.controls("Curve options"):
            q1, q2 = st.columns(2)
            ui.init_control("pbm_p")
            top = data.max_rank(ds.key)
            ui.init_control("pbm_ranks", int(min(30, max(5, top))), options=range(5, int(max(6, top)) + 1))
            p = q1.slider("Exponential p", 0.5, 0.99, step=0.01, key="w_pbm_p",
                          help="Rank-biased-precision user model p^(r−1)")
            max_rank = q2.slider("Ranks shown", 5, int(max(6, top)), key="w_pbm_ranks")
        curves = data.pbm_curves(ds.key, p, max_rank)
        n = len(next(iter(curves.values())))
        at = min(10, n)
        vals = {k: float(v[at - 1]) for k, v in curves.items()}
        take = (f"At rank {at} the learnt curve is {vals[next(iter(vals))]:.3g}; log₂ assumes "
                f"{vals['1/log₂(r+1)']:.3g} and {p:g}^(r−1) assumes {list(vals.values())[2]:.3g} — pick the "
                "discount whose curve follows the learnt one.")
        ui.show_figure(data.pbm_chart(ds.key, p, max_rank), key="pbm", name="position_bias", take=take)
        table = pd.DataFrame({"rank": np.arange(1, n + 1), **{k: np.asarray(v) for k, v in curves.items()}})
        with st.expander("Curve values"):
            ui.show_table(table, key="pbm_table", name="position_bias_curves")


def _rewards() -> None:
    # a 0/1 reward has a rate (a percentage); a real-valued one (watch seconds, counts) a mean
    rates = data.reward_overview(ds.key)
    left, right = st.columns([3, 2])  # full width: every header of the rewards table readable at 1280 px
    with left:
        st.markdown("**Rewards**")
        ui.show_table(rates, key="reward_rates", name="reward_rates",
                      column_config={"sessions with ≥ 1": st.column_config.NumberColumn(
                          "sessions with a reward > 0", format="percent")},
                      units="per impression: share of impressions with the reward (0/1 rewards) or mean reward per "
                            "impression (real-valued rewards); sessions with a reward > 0 as a share of sessions")
        zero = [r for r, v in s.reward_rates.items() if v == 0]
        if zero:
            st.warning(f"Reward(s) {escape_markdown(', '.join(zero))} have no positive value: every estimate on them "
                       "is 0. Choose another reward in the sidebar.", icon=":material/warning:")
    with right:
        st.markdown("**Sessions per arm and session length**")
        arms = pd.DataFrame({"arm": list(s.arms), "sessions": list(s.arms.values())})
        ui.show_table(arms, key="arms", name="arms")
        st.caption(f"Session length: {s.length_text()}.")
    if len(s.days) < 2:
        st.warning("Only one day: the Correlation page needs several days per experiment.", icon=":material/warning:")
    if len(s.experiments) < 2:
        st.warning("Only one experiment: the Decisions page needs several A/B tests, and the offline-online "
                   "correlation pages have one experiment to go on. The **Candidates** page compares every candidate "
                   "with the logging policy offline.", icon=":material/warning:")
        ui.links(("candidates",))


_curve()  # the chart first, full width, in both modes
if not c.present:
    _rewards()

m = st.columns(3) * 2 if c.present else st.columns(6)  # presenting: 3 × 2, so 1,207,877 fits at projector size
m[0].metric("Sessions", f"{s.sessions:,}")
m[1].metric("Impressions", f"{s.rows:,}")
m[2].metric("Days", len(s.days), help=f"{s.days[0]} … {s.days[-1]}")
m[3].metric("Experiments", len(s.experiments))
m[4].metric("Arms", len(s.arms), help=", ".join(f"{a}: {n:,} sessions" for a, n in s.arms.items()))
m[5].metric("Target policies", len(s.policies))
if c.present:
    _rewards()

with st.expander("What offeval understood", expanded=not c.present, icon=":material/fact_check:"):
    st.caption("The same summary `offeval validate` and `offeval dashboard FILE --check` print.")
    st.markdown(understood.to_markdown())

if PRESENTING:
    st.divider()
    with st.expander("Load other data", icon=":material/database:"):
        _loader()
