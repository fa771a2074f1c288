"""Data: choose the demo, upload CSV / Parquet (with a column mapping) or a moments file (``offeval reduce``),
or simulate a world; validation report, data summary and the learnt position-bias curve next to log2 and
exponential (for a moments file: its grid, groups and settings)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import data, ui
from offeval_core import mapping as column_mapping
from offeval_core.errors import InputError
from offeval_core.logs import KNOWN
from offeval_core.sanitize import escape_markdown

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
    try:
        if data.upload_moments(sha, f.name, buf) is not None:
            ss["upload_info"] = {"sha": sha, "name": f.name, "mapping": {}, "kind": "moments"}
            ss["w_dataset"] = "upload"
            return
        data.upload_raw(sha, f.name, buf)
    except InputError as exc:  # every loader failure (unreadable, over a limit, invalid moments)
        ss["upload_error"] = exc
        return
    raw = data.upload_raw(sha, f.name, buf)
    guessed = column_mapping.guess_mapping(raw)  # common names (visit, pos, variant…) mapped at once
    ss["upload_info"] = {"sha": sha, "name": f.name, "mapping": guessed}
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


def _form_mapping(raw: pd.DataFrame) -> tuple[dict[str, str], list[str], str]:
    """(mapping with patterns expanded, rewards, problem) from the mapping widgets' current values."""
    mapping = {}
    for name in KNOWN:
        chosen = ss.get(f"w_map_{name}")
        if chosen and chosen != NONE and chosen != name:
            mapping[name] = chosen
    pattern = (ss.get("w_map_policies") or "").strip()
    if pattern:
        if pattern.count("*") != 1:
            return mapping, [], ("The policy columns pattern needs exactly one *, standing for the policy name "
                                 f"(e.g. pos_*); got “{pattern}”.")
        mapping["rank__*"] = pattern
    try:
        concrete = column_mapping.expand_mapping(raw.columns, mapping)
    except ValueError:
        return mapping, [], f"No column matches the policy columns pattern “{pattern}”."
    return concrete, list(ss.get("w_map_rewards") or []), ""


def _init_mapping_widgets(raw: pd.DataFrame, info: dict) -> None:
    """Fill the mapping widgets once per upload: the applied mapping, else guesses for common names."""
    if ss.get("_map_for") == info["sha"]:
        return
    ss["_map_for"] = info["sha"]
    cols = [str(x) for x in raw.columns]
    current = {k: v for k, v in info.get("mapping", {}).items() if k != "reward"}
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
    used = set(merged.values()) | set(KNOWN)
    numeric = [c for c in cols if c not in used and not c.startswith(("rank__", "target_propensity__"))
               and pd.api.types.is_numeric_dtype(raw[c])]
    ranky = set(column_mapping.rank_like_rewards(raw, numeric))
    chosen = info.get("mapping", {}).get("reward")
    ss["w_map_rewards"] = chosen.split(",") if chosen else [c for c in numeric if c not in ranky]


def _on_mapping(raw_key: tuple[str, str]) -> None:
    raw = data.upload_raw(*raw_key)
    concrete, rewards, problem = _form_mapping(raw)
    if problem:
        ss["_map_problem"] = problem
        return
    ss.pop("_map_problem", None)
    info = dict(ss.get("upload_info") or {})
    mapping = dict(concrete)
    if rewards:
        mapping["reward"] = ",".join(rewards)
    info["mapping"] = mapping
    ss["upload_info"] = info
    ss["w_dataset"] = "upload"


def _mapping_form(raw: pd.DataFrame, info: dict, *, expanded: bool) -> None:
    """The column-mapping form: schema fields, a policy-columns pattern, the reward picker, and a live preview
    of what each column becomes; applied with one button."""
    cols = [str(x) for x in raw.columns]
    _init_mapping_widgets(raw, info)
    if "w_map_open" not in ss or ss.get("_map_open_for") != info["sha"]:
        ss["w_map_open"] = expanded  # open when the file needs a mapping; then as the user leaves it
        ss["_map_open_for"] = info["sha"]
    with st.expander("Column mapping", key="w_map_open", icon=":material/swap_horiz:"):
        st.caption("Which of your columns holds each schema field (common names such as visit, pos, variant, "
                   "date and test are guessed), which columns are the target policies' ranks, and which are "
                   "rewards. The preview updates as you choose; **Apply mapping** reloads the file.")
        grid = st.columns(4)
        for i, name in enumerate(KNOWN):
            grid[i % 4].selectbox(name + (" *" if name in ("session_id", "rank") else ""), [NONE, *cols],
                                  key=f"w_map_{name}")
        a, b = st.columns([1, 2])
        a.text_input("Policy columns (pattern)", key="w_map_policies", placeholder="e.g. pos_*",
                     help="Columns holding the rank each candidate policy would give the item; * stands for "
                          "the policy's name (pos_* makes pos_treatment the policy 'treatment'). Columns "
                          "already named rank__<policy> need no pattern.")
        concrete, _, problem = _form_mapping(raw)
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

        def role(col: str) -> str:
            k = inverse.get(col, col if col in KNOWN or col.startswith("rank__") else None)
            if k and k.startswith("rank__"):
                return f"target policy “{k[len('rank__'):]}”"
            if k:
                return k
            return "reward" if col in rewards else "not used"

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
if ss.get("w_source") not in SOURCES or ss.get("_source_for") != ss.get("w_dataset"):
    ss["w_source"] = ss.get("w_dataset", "demo") if ss.get("w_dataset") in SOURCES else "demo"
ss["_source_for"] = ss.get("w_dataset")
source = st.segmented_control("Source", list(SOURCES), key="w_source", format_func=SOURCES.get, required=True)
if source == "demo":
    st.markdown("Twenty simulated A/B tests over seven days of a short-video feed, with three rewards (like, "
                "watch_complete, watch_time), the production and treatment rankers and ten candidate rankers, "
                "plus the exact ground truth. Written by `make data`.")
    st.button("Use the demo data", key="w_use_demo", on_click=_use, args=("demo",), type="primary",
              disabled=ss.get("w_dataset") == "demo")

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
        if load_error is not None:
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
                         "world (6 tests × 7 days × 2000 sessions; about half a minute)")
        b.number_input("Seed", min_value=0, value=1, step=1, key="w_sim_seed")
        d.number_input("Sessions per arm and day (0 = preset)", min_value=0, max_value=20000, value=0, step=100,
                       key="w_sim_sessions")
        a.number_input("Days (0 = preset)", min_value=0, max_value=30, value=0, key="w_sim_days")
        b.number_input("Support depth (0 = full support)", min_value=0, max_value=60, value=0,
                       key="w_sim_support", help="Breaks Asm. 5: items below this rank are never shown")
        d.markdown("**Break an assumption (KDD'24 Sec. 4)**")
        d.checkbox("Cascade browsing (Asm. 2)", key="w_sim_cascade")
        d.checkbox("Reward interactions across ranks (Asm. 3)", key="w_sim_reward_interactions")
        d.checkbox("Context-dependent position bias (Asm. 2)", key="w_sim_contextual_position_bias")
        st.form_submit_button("Simulate", type="primary", on_click=_on_simulate)
    if ss.get("sim_spec"):
        st.caption(f"Current simulation: `{ss['sim_spec']}`")

st.divider()
if c.dataset is None:
    st.error(f"No valid data is loaded. {escape_markdown(c.problem)} Use one of the tabs above.", icon=":material/error:")
    st.stop()

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
    st.stop()
s = ds.summary
st.subheader(f"Validation report — {escape_markdown(ds.label)}")
if ds.note:
    st.info(escape_markdown(ds.note), icon=":material/info:")
st.success("The logs follow the schema: no missing columns, duplicate (session, rank) pairs, bad ranks, "
           "NaN rewards or unknown arms.", icon=":material/check_circle:")
for note in s.notes:
    st.info(escape_markdown(note), icon=":material/info:")

m = st.columns(6)
m[0].metric("Sessions", f"{s.sessions:,}")
m[1].metric("Impressions", f"{s.rows:,}")
m[2].metric("Days", len(s.days), help=f"{s.days[0]} … {s.days[-1]}")
m[3].metric("Experiments", len(s.experiments))
m[4].metric("Arms", len(s.arms), help=", ".join(f"{a}: {n:,} sessions" for a, n in s.arms.items()))
m[5].metric("Target policies", len(s.policies))

left, right = st.columns([2, 3])
with left:
    # a 0/1 reward has a rate (a percentage); a real-valued one (watch seconds, counts) a mean
    rates = data.reward_overview(ds.key)
    st.markdown("**Rewards**")
    ui.show_table(rates, key="reward_rates", name="reward_rates",
                  column_config={"sessions with ≥ 1": st.column_config.NumberColumn(
                      "sessions with a reward > 0", format="percent")},
                  units="per impression: share of impressions with the reward (0/1 rewards) or mean reward per "
                        "impression (real-valued rewards); sessions with a reward > 0 as a share of sessions")
    zero = [r for r, v in s.reward_rates.items() if v == 0]
    if zero:
        st.warning(f"Reward(s) {escape_markdown(', '.join(zero))} have no positive value: every estimate on them is 0. "
                   "Choose another reward in the sidebar.", icon=":material/warning:")
    st.markdown("**Sessions per arm and session length**")
    arms = pd.DataFrame({"arm": list(s.arms), "sessions": list(s.arms.values())})
    ui.show_table(arms, key="arms", name="arms")
    st.caption(f"Session length: mean {s.mean_length:.1f}; "
               + ", ".join(f"{k} {v:g}" for k, v in s.length_quantiles.items()))
    st.markdown("**Experiments and policies**")
    st.text(", ".join(map(str, s.experiments)))
    st.text(", ".join(s.policies) or "No target policies (no rank__<policy> or target_propensity__<policy> columns).")
    if len(s.days) < 2:
        st.warning("Only one day: the Correlation page needs several days per experiment.", icon=":material/warning:")
    if len(s.experiments) < 2:
        st.warning("Only one experiment: the Decisions page needs several A/B tests.", icon=":material/warning:")

with right:
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
        take = (f"At rank {at} the learnt curve is {vals[next(iter(vals))]:.3f}; log₂ assumes "
                f"{vals['1/log₂(r+1)']:.3f} and {p:g}^(r−1) assumes {list(vals.values())[2]:.3f} — pick the "
                "discount whose curve follows the learnt one.")
        ui.show_figure(data.pbm_chart(ds.key, p, max_rank), key="pbm", name="position_bias", take=take)
        table = pd.DataFrame({"rank": np.arange(1, n + 1), **{k: np.asarray(v) for k, v in curves.items()}})
        with st.expander("Curve values"):
            ui.show_table(table, key="pbm_table", name="position_bias_curves")
