"""The global controls (sidebar) and their seeding from a shared URL; writing the view back to the URL is in
:mod:`dashboard.share`."""

from __future__ import annotations

import math

import streamlit as st

from dashboard import clip_choice, data, served, ui
from dashboard.pages import PAGE_TITLES
from dashboard.state import (
    CLIP_CHOICES,
    GLOBAL,
    LEVELS,
    PAGE_CONTROLS,
    USES,
    Settings,
    parse_query_params,
    recommends_clip,
)
from offeval_core.defaults import LEVEL
from offeval_core.discounts import register_table, restrict_table_files
from offeval_core.errors import OffevalError
from offeval_core.inputs import data_files
from offeval_core.sanitize import escape_markdown

DISCOUNT_CHOICES = ("pbm", "log2", "reciprocal", "exponential:0.9", "exponential:0.8", "log2@10")
DATASET_LABELS = {"demo": "Bundled demo", "sim": "Simulated world", "upload": "Uploaded file",
                  "moments": "Moments file", "file": "Served file"}
FIELD_OF = {"w_dataset": "dataset", "w_reward": "reward", "w_policy": "policy", "w_discount": "discount",
            "w_exposure": "exposure", "w_clip": "clip", "w_level": "level", "w_present": "present",
            "w_method": "method", "w_variants": "variants", "w_estimators": "estimators",
            "w_experiment": "experiment"}
CONTROL_KEYS = {f"w_{name}": name for name in PAGE_CONTROLS}
# widget keys whose values live across pages (a page's widgets are dropped when another page runs)
PERSIST = (*FIELD_OF, *CONTROL_KEYS)
LIST_FIELDS = ("variants", "estimators")
DECK = ("sensitivity", "correlation", "dcg-vs-ndcg", "decisions", "clip-tuning")
"""The pages presentation mode steps through by default."""
PAGE_DEFAULTS_KEY = "_page_defaults"
WRITTEN_KEY = "_written_params"


def _served_defaults() -> dict:
    return {"dataset": "file"} if served.served() else {}


def _seed(settings: Settings, *, reset: bool) -> None:
    """Put settings into the widgets' state; with ``reset`` (Back / Forward, an edited URL) also return the
    controls absent from the URL to their defaults."""
    ss = st.session_state
    for key, name in FIELD_OF.items():
        value = getattr(settings, name)
        if value is None or (name in LIST_FIELDS and not value):
            if reset and name not in ("dataset",):
                ss.pop(key, None)
            continue
        ss[key] = list(value) if name in LIST_FIELDS else value
    given = dict(settings.controls)
    for key, name in CONTROL_KEYS.items():
        if name in given:
            v = given[name]
            ss[key] = list(v) if PAGE_CONTROLS[name].kind == "list" else v
        elif reset:
            ss.pop(key, None)
    if settings.sim:
        ss["sim_spec"] = settings.sim
    if settings.moments:
        ss["moments_path"] = settings.moments


def seed_from_url(page_url_path: str = "") -> Settings:
    """Put the URL's settings into the widgets' state on a session's first run, and again whenever the URL
    changed without this app writing it (the browser's Back / Forward, a pasted link). Moving to another page
    through the navigation clears the query string: that keeps the state (the page writes it back)."""
    ss = st.session_state
    params = st.query_params.to_dict()
    first = "_init" not in ss
    if not first and params == ss.get(WRITTEN_KEY, params):
        return ss["_url_settings"]
    if not first and not params and page_url_path != ss.get("_written_page", page_url_path):
        return ss["_url_settings"]
    settings = parse_query_params(params)
    if "dataset" not in params and served.served():
        settings = settings.replace(dataset="file")
    if "dataset" not in params and not first:
        ss["w_dataset"] = settings.dataset
    _seed(settings, reset=not first)
    ss["_init"] = True
    ss["_url_settings"] = settings
    ss[WRITTEN_KEY] = params
    return settings


def keep_state() -> None:
    for k in PERSIST:
        if k in st.session_state:
            st.session_state[k] = st.session_state[k]


def current_settings() -> Settings:
    ss = st.session_state
    values = {}
    for key, name in FIELD_OF.items():
        if key in ss and ss[key] is not None:
            v = ss[key]
            values[name] = tuple(v) if name in LIST_FIELDS else v
    if ss.get("w_dataset") == "sim" and ss.get("sim_spec"):
        values["sim"] = ss["sim_spec"]
    if ss.get("w_dataset") == "moments" and ss.get("moments_path"):
        values["moments"] = ss["moments_path"]
    controls = {name: ss[key] for key, name in CONTROL_KEYS.items() if ss.get(key) is not None}
    return Settings(**values).with_controls(**controls)


def _dataset_key(choice: str) -> tuple[str, str]:
    """(dataset key, problem) for the sidebar's dataset choice."""
    ss = st.session_state
    if choice == "sim":
        spec = ss.get("sim_spec")
        if not spec:
            return "demo", "No simulated world yet: simulate one on the Data page. Showing the demo."
        try:
            data.simulated_config(spec)  # its options and the world's size, before anything is simulated
        except ValueError as exc:
            return "demo", f"The simulation in the link is not valid ({exc}). Showing the demo."
        return f"sim:{spec}", ""
    if choice == "upload":
        info = ss.get("upload_info")
        if not info:
            return "", ("This view refers to an uploaded file, which never leaves the machine it was "
                        "uploaded on, so it is not part of a link. Upload the file on the Data page.")
        if info.get("kind") == "moments":
            return f"mupload:{info['sha']}|{info['name']}", ""
        return data.upload_key(info["sha"], info["name"], info.get("mapping", {})), ""
    if choice == "file":
        key = served.served_key()
        if not key:
            return "demo", ("This link refers to the file a server was started on (offeval dashboard FILE); "
                            "this server has none. Showing the demo.")
        return key, ""
    if choice == "moments":
        path = ss.get("moments_path")
        if not path:
            return "demo", "No moments file given (add ?moments=NAME, a file of the data directory, to the link). Showing the demo."
        return f"mfile:{path}", ""
    return "demo", ""


def _load(key: str):
    ready = data.is_ready("dataset", key)
    label = {"demo": "Loading the demo data"}.get(key.split(":")[0], "Loading the data")
    if key.startswith("sim:"):
        label = f"Simulating the world {key[4:]}"
    ds = ui.with_progress(f"{label} and validating it (first time only)…", ready, lambda: data.load(key))
    data.mark_ready("dataset", key)
    return ds


def _uses(page_url_path: str) -> tuple[str, ...]:
    if page_url_path == "dcg-vs-ndcg" and st.session_state.get("w_agr_source") == "heldout":
        return ("level",)
    if page_url_path == "candidates" and st.session_state.get("w_cand_clip", "recommended") == "recommended":
        return tuple(u for u in USES["candidates"] if u != "clip")  # the comparison's clip comes from its rule
    if page_url_path == "sensitivity" and st.session_state.get("w_sens_all", PAGE_CONTROLS["sens_all"].default):
        return tuple(u for u in USES["sensitivity"] if u != "reward")  # every reward is pooled: no reward to pick
    return USES.get(page_url_path or "data", GLOBAL)


def render(page_url_path: str = "") -> ui.Context:
    """Draw the sidebar (only the controls the page reads), load the data and resolve the settings against it;
    return the context. The URL is written by :func:`finish` once the page has run."""
    ss = st.session_state
    restrict_table_files()  # table:NAME specs from the URL or a widget never open a server path
    url_settings = seed_from_url(page_url_path)
    keep_state()
    notes = list(url_settings.problems) if not ss.get("_url_problems_shown") else []
    after: list = []  # drawn once the page has run (Context.after_page)
    ss["_url_problems_shown"] = True
    page_defaults = ss.setdefault(PAGE_DEFAULTS_KEY, {})
    page_defaults.update(_served_defaults())
    uses = _uses(page_url_path)

    sb = st.sidebar
    present = bool(ss.get("w_present", False))
    where = sb.empty()
    box = sb.expander("Settings", expanded=not present, icon=":material/tune:") if uses else sb.container()

    options = ["demo"]
    if served.served():
        options.insert(0, "file")
    if ss.get("sim_spec"):
        options.append("sim")
    if ss.get("upload_info") or ss.get("w_dataset") == "upload":
        options.append("upload")
    if ss.get("moments_path"):
        options.append("moments")
    if ss.get("w_dataset") not in options:
        ss["w_dataset"] = options[0]

    def label_of(x):
        return f"{DATASET_LABELS[x]} ({served.served_name()})" if x == "file" else DATASET_LABELS.get(x, x)

    if "dataset" in uses:
        box.selectbox("Dataset", options, key="w_dataset", format_func=label_of,
                      help="Load or simulate data on the Data page")
    choice = ss["w_dataset"]
    key, problem = _dataset_key(choice) if uses else ("", "")
    dataset = None
    ss.pop("_load_error", None)
    if key:
        try:
            dataset = _load(key)
        except OffevalError as exc:  # offeval's own errors only: anything else is a bug
            ss["_load_error"] = exc
            what, _ = ui.explain(exc)
            problem = f"{what}."
    if problem and "_load_error" not in ss:
        notes.append(problem)

    reward = policy = None
    weights_only = False  # a propensity policy: the discount models do not apply to the page
    grid = dataset.file_moments.grid if dataset is not None and dataset.is_moments else None
    if dataset is not None:
        rewards = list(dataset.rewards)
        first = data.default_reward(dataset)
        page_defaults["reward"] = first
        if ss.get("w_reward") not in rewards:
            ss["w_reward"] = first
        if "reward" in uses:
            box.selectbox("Reward", rewards, key="w_reward",
                          help="The reward column whose online mean the offline metrics estimate")
        reward = ss["w_reward"]
        targets = dataset.targets
        policies = list(targets.all)
        if policies:
            page_defaults["policy"] = targets.default  # never the logging policy if another exists
            if ss.get("w_policy") not in policies:
                ss["w_policy"] = page_defaults["policy"]
            if "policy" in uses:
                box.selectbox("Target policy", policies, key="w_policy",
                              format_func=lambda p: p + (" (propensities)" if targets.kind(p) == "propensity"
                                                         else "") + (" = the logging policy" if p in targets.logging
                                                                     else ""),
                              help="The candidate policy, given by ranks (a rank__<policy> column) or by "
                                   "propensities (target_propensity__<policy>). It opens on 'treatment' (the policy "
                                   "that served the treatment arm) when there is one, else on the first candidate "
                                   "that is not a copy of the logging policy.")
            policy = ss["w_policy"]
            if targets.kind(policy) == "propensity" and "policy" in uses:  # weights π_t / π_p: no D, D0
                uses = tuple(u for u in uses if u not in ("discount", "exposure"))
                weights_only = True
        elif "policy" in uses:
            box.selectbox("Target policy", ["(none in these logs)"], key="w_policy_none", disabled=True)
        if page_url_path == "candidates" and policies and all(
                targets.kind(p) == "propensity" for p in data.candidate_policies(dataset.key)):
            uses = tuple(u for u in uses if u not in ("discount", "exposure"))  # no rank candidate to discount
            weights_only = True

    if dataset is not None and reward is not None:
        data.warm_up(dataset, reward=page_defaults["reward"], policy=page_defaults.get("policy") if policy else None,
                     page=page_url_path)

    for wkey, label, helptext in (
        ("w_discount", "Target discount D", "Position-bias model of the target ranking: P(view | rank). "
                                            "'pbm' is learnt from the logs; add '@n' for a cut-off."),
        ("w_exposure", "Exposure model D0", "Position-bias model of the logged ranks: labels are de-biased by "
                                            "1 / D0 (clipped at m)"),
    ):
        shown = FIELD_OF[wkey] in uses
        if grid is not None:  # a moments file: only the models it was reduced with
            opts = list(grid.discounts if wkey == "w_discount" else grid.exposures)
            if ss.get(wkey) not in opts:
                ss[wkey] = "pbm" if "pbm" in opts else opts[0]
            if shown:
                box.selectbox(label, opts, key=wkey, help=helptext + " (the models in the moments file)")
            ss[f"_bad_{wkey}"] = False
            continue
        current = ss.get(wkey, "pbm")
        opts = list(dict.fromkeys([*DISCOUNT_CHOICES, *_table_choices(), current]))
        if wkey not in ss:
            ss[wkey] = "pbm"
        if shown:
            box.selectbox(label, opts, key=wkey, accept_new_options=True, help=helptext)
        if dataset is None:
            ss[f"_bad_{wkey}"] = False
            continue
        problem_text = data.discount_problem(dataset.key, ss[wkey])
        if problem_text:
            if shown:
                box.error(f"{label}: {escape_markdown(problem_text)}. Using 'pbm' instead.")
            notes.append(f"{label} {ss[wkey]!r} is not valid: {problem_text}")
        ss[f"_bad_{wkey}"] = bool(problem_text)

    if grid is None and "dataset" in uses and not weights_only:  # not on pages of own data or propensity weights
        with box.popover("Upload a discount table", icon=":material/upload_file:", width="stretch"):
            st.file_uploader("CSV with columns rank, probability", type=["csv"], key="w_table_upload",
                             on_change=_on_table_upload,
                             help="A position-bias curve P(view | rank) of your own: it becomes a 'table:' choice "
                                  "of both discount menus. Files on the server are never opened by path.")
        if ss.get("_table_error") is not None:
            box.error(f"Discount table: {escape_markdown(ss['_table_error'])}", icon=":material/error:")

    clip_choices = tuple(sorted(grid.clips)) if grid is not None else CLIP_CHOICES
    if ss.get("w_clip") not in clip_choices:
        clip = ss.get("w_clip")
        if isinstance(clip, float) and not math.isnan(clip):
            notes.append(f"clip m = {clip:g} is not in the grid; using the nearest grid value")
            ss["w_clip"] = min(clip_choices, key=lambda c: abs(math.log2(c if math.isfinite(c) else 2 ** 14)
                                                              - math.log2(clip if math.isfinite(clip) else 2 ** 14)))
        else:
            ss["w_clip"] = math.inf
    if "clip" in uses:
        box.select_slider("Clip value m", clip_choices, key="w_clip", format_func=ui.clip_label,
                          help="Labels are de-biased as c · min(m, 1/D0): m = 1 uses raw labels, m = ∞ is unbiased. "
                               "For a propensity policy m is the cap c of the weights π_t / π_p (Gilotte Sec. 4.2).")
        # the clip in force, why, and the recommended one a click away: of the sidebar's target policy, named when
        # the page does not show it (DCG vs nDCG: one clip for every rank policy; Candidates has its own rule)
        of = None if "policy" in uses else policy
        if dataset is not None and recommends_clip(page_url_path) and (
                of is None or (policy and dataset.targets.kind(policy) != "propensity")):
            d = "pbm" if ss.get("_bad_w_discount") else ss.get("w_discount", "pbm")
            e = "pbm" if ss.get("_bad_w_exposure") else ss.get("w_exposure", "pbm")
            level = ss.get("w_level") if ss.get("w_level") in LEVELS else LEVEL
            slot, m = box.container(), ss["w_clip"]  # drawn once the page has run (app.py): its chart comes first

            def show_recommendation(slot=slot, m=m, args=(dataset, reward, policy, d, e, level), of=of):
                rec = clip_choice.recommendation(*args)
                clip_choice.show_clip_choice(slot, m, rec, key="w_use_recommended", of=of)

            after.append(show_recommendation)
    if ss.get("w_level") not in LEVELS:
        ss["w_level"] = LEVEL
    if "level" in uses:
        box.select_slider("Confidence level", LEVELS, key="w_level",
                          format_func=lambda x: f"{x:.1%}".replace(".0%", " %"))
    sb.toggle("Presentation mode", key="w_present",
              help="Collapse the controls, enlarge fonts, show a takeaway above each chart; the arrow keys "
                   "(or a presenter's PageUp / PageDown) step through the chosen pages")
    if ss.get("w_present"):
        ui.page_default("deck", list(DECK))
        if not ss.get("w_deck") or any(p not in PAGE_TITLES for p in ss["w_deck"]):
            ss["w_deck"] = [p for p in (ss.get("w_deck") or []) if p in PAGE_TITLES] or list(DECK)
        sb.multiselect("Slides (in order)", list(PAGE_TITLES), key="w_deck", format_func=PAGE_TITLES.get,
                       help="The pages the arrow keys step through, in this order")
        import json

        st.html(DECK_JS % json.dumps(list(ss["w_deck"])), unsafe_allow_javascript=True)  # first, so keys work early

    settings = current_settings()
    fixes = {}
    if ss.get("_bad_w_discount"):
        fixes["discount"] = "pbm"
    if ss.get("_bad_w_exposure"):
        fixes["exposure"] = "pbm"
    settings = settings.replace(reward=reward, policy=policy, **fixes)
    if dataset is None:
        settings = settings.replace(reward=None, policy=None)
    _where(where, page_url_path, uses, dataset, choice)
    ss["_link_slot"] = sb.empty()
    ui.inject_css(settings.present)
    c = ui.Context(settings=settings, dataset=dataset, problem=problem, notes=tuple(notes), uses=uses,
                   after_page=tuple(after))
    ss[ui.CTX_KEY] = c
    return c


def _where(slot, page_url_path: str, uses: tuple[str, ...], dataset, choice: str) -> None:
    """What data the page runs on, said at the top of the sidebar."""
    if page_url_path == "estimator-lab":
        slot.caption("This page runs on its own simulated held-out data (MNAR feedback with a known truth); "
                     "the dataset, reward, discount and clip settings do not apply to it.")
    elif "dataset" not in uses:
        slot.caption("Held-out runs: the simulated model zoo or the uploaded qrels + runs; the dataset, reward, "
                     "discount and clip settings do not apply. Only the confidence level does.")
    elif dataset is not None:
        job = data.progress(dataset.key)
        done = job.done if job is not None else 0  # read once: the preparation thread moves it on
        busy = (f" · preparing the analysis pages in the background ({done} of {len(job.steps)} done; "
                f"next: {ui.md_escape(job.steps[done])})" if job is not None and done < len(job.steps) else "")
        slot.caption(f"Runs on: **{ui.md_escape(dataset.label)}**{busy}")


DECK_JS = """
<script>
(function () {
  const w = window.parent && window.parent.document ? window.parent : window;
  w.__offevalDeck = %s;
  if (w.__offevalDeckListener) return;
  w.__offevalDeckListener = true;
  w.document.addEventListener("keydown", function (ev) {
    const t = ev.target;
    if (t && (t.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(t.tagName)
              || t.getAttribute("role") === "slider")) return;
    const step = {ArrowRight: 1, PageDown: 1, ArrowLeft: -1, PageUp: -1}[ev.key];
    if (!step) return;
    const deck = w.__offevalDeck || [];
    const here = w.location.pathname.replace(/\\/$/, "").split("/").pop() || "data";
    const i = deck.indexOf(here);
    const next = deck[i < 0 ? 0 : Math.min(deck.length - 1, Math.max(0, i + step))];
    if (!next || next === here) return;
    ev.preventDefault();
    const links = Array.from(w.document.querySelectorAll('[data-testid="stSidebarNav"] a'));
    const link = links.find(a => (new URL(a.href).pathname.replace(/\\/$/, "").split("/").pop() || "data") === next);
    if (link) { link.click(); } else { w.location.assign(next === "data" ? "./" : next + w.location.search); }
  });
})();
</script>
"""


def _table_choices() -> list[str]:
    """``table:NAME`` choices: tables uploaded in this session and the operator's data directory."""
    names = list(st.session_state.get("uploaded_tables", ()))
    names += [n for n in data_files((".csv",)) if n not in names]
    return [f"table:{n}" for n in names]


def _on_table_upload() -> None:
    """Validate an uploaded discount table, register it under a content-derived name and select it."""
    ss = st.session_state
    f = ss.get("w_table_upload")
    ss["_table_error"] = None
    if f is None:
        return
    try:
        name = register_table(f.getvalue(), name=f.name)
    except OffevalError as exc:
        ss["_table_error"] = exc
        return
    ss["uploaded_tables"] = list(dict.fromkeys([*ss.get("uploaded_tables", ()), name]))
    ss["w_discount"] = f"table:{name}"
