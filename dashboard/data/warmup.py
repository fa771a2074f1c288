"""Background preparation of the analysis pages at their default settings, once per dataset and server.

Opening a page the first time runs its reduces (one per reward and discount model) and analyses; the
Sensitivity page pools every reward, so it waits for all of them. Once a dataset is loaded, one background
thread computes, through the same cached functions the pages call, what each page needs at its default
settings, the page the user is on first (:func:`page_first`), then in the navigation's order: the Data
page's summary, the moments of every reward with a positive
value (D = D0 = pbm) and the Sensitivity result, the first reward's log2 moments and the Correlation
result, the DCG vs nDCG bootstrap, the Decisions result and the clip-tuning result. A page opened later
reads them from the cache; a page opened meanwhile waits for the result being computed (the caches compute
each value once) and shows its own progress. Moments already in the persistent moments cache
(:mod:`offeval_core.moments_cache`) are read, not computed. The sidebar says how far the preparation is (:func:`progress`).

Only under a running server (``streamlit run``): in-process tests (AppTest) never start the thread.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dashboard.data.analyses import (
    agreement_result,
    candidate_policies,
    candidates_result,
    clip_tuning_result,
    correlation_clip_result,
    correlation_result,
    decision_result,
    sensitivity_result,
)
from dashboard.data.dataset_moments import default_grid, moments, note_prepared_later, propensity_moments
from dashboard.data.datasets import Dataset, load
from dashboard.data.overview import learnt_pbm, max_rank, reward_overview
from dashboard.data.page_defaults import agreement_policies, sensitivity_rewards
from offeval_core.analyses.plan import correlation_variants, decision_estimators

__all__ = ["Warmup", "default_choices", "default_reward", "page_first", "page_running", "prefetch", "progress",
           "steps", "warm_up", "wait_for_idle"]

_LOG = logging.getLogger(__name__)
_LOCK = threading.Lock()
_JOBS: dict[str, Warmup] = {}
_IDLE = threading.Condition()
_PAGE_RUNS = 0
_LAST_END = -math.inf
PAUSE_CAP = 60.0
"""Seconds the preparation waits at most for the script runs under way to end before its next step."""
DRAW_GRACE = 1.5
"""Seconds after a script run ends before the preparation's next step: the browser draws what the run sent (a new
tab compiles Streamlit's chart and table code, about a second of one core on a 2-core machine), and the
preparation's queries would take both cores from it when the browser runs on the server's machine."""


@contextlib.contextmanager
def page_running():
    """Around a page's script run (``app.py``): the background preparation starts no new step while any script
    run is under way, so a page never shares the interpreter with work it does not need (Python threads take
    turns: a page's pandas work would wait for the preparation's), nor in the :data:`DRAW_GRACE` seconds after the
    last run ended. A step under way finishes; a page that needs a value being prepared waits for it, and computes
    itself a value the preparation has not started."""
    global _PAGE_RUNS, _LAST_END
    with _IDLE:
        _PAGE_RUNS += 1
    try:
        yield
    finally:
        with _IDLE:
            _PAGE_RUNS -= 1
            _LAST_END = time.monotonic()
            _IDLE.notify_all()


def wait_for_idle(cap: float = PAUSE_CAP) -> None:
    """Until no script run is under way (:func:`page_running`) and the last one ended :data:`DRAW_GRACE` seconds
    ago, at most ``cap`` seconds."""
    deadline = time.monotonic() + cap
    with _IDLE:
        while (left := deadline - time.monotonic()) > 0:
            if _PAGE_RUNS == 0:
                drawn = _LAST_END + DRAW_GRACE - time.monotonic()
                if drawn <= 0:
                    return
                left = min(left, drawn)
            _IDLE.wait(timeout=left)


@dataclass
class Warmup:
    """Progress of one dataset's background preparation: the steps' labels in their order and how many are done.
    The steps not started yet are re-ordered for the page the user is on (:meth:`put_first`)."""

    steps: tuple[str, ...]
    done: int = 0
    failed: list[str] = field(default_factory=list)
    _todo: list = field(default_factory=list, repr=False)
    _started: int = field(default=0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def running(self) -> bool:
        return self.done < len(self.steps)

    def put_first(self, page: str) -> None:
        """The steps not started yet of the page at url path ``page`` first (:func:`page_first`): a page opened
        while the preparation runs waits only for the step under way, not for the other pages' steps."""
        with self._lock:
            self._todo = page_first(self._todo, page)
            self.steps = self.steps[:self._started] + tuple(label for label, _ in self._todo)

    def _next(self) -> tuple[str, Callable[[], object]] | None:
        with self._lock:
            if not self._todo:
                return None
            self._started += 1
            return self._todo.pop(0)


def default_reward(ds: Dataset) -> str:
    """The reward a page opens on: the first with a positive value, else the first."""
    rates = ds.reward_rates
    return next((r for r in ds.rewards if rates.get(r, 0) > 0), ds.rewards[0])


def default_choices(ds: Dataset) -> tuple[str, str | None]:
    """(reward, target policy) a page opens on: :func:`default_reward` and the dataset's default target policy
    (None without one)."""
    return default_reward(ds), (ds.targets.default if ds.targets.all else None)


def steps(ds: Dataset, reward: str, policy: str | None) -> list[tuple[str, Callable[[], object]]]:
    """(label, call) of every default result, pages in the navigation's order (Data, Sensitivity, Correlation,
    DCG vs nDCG, Decisions, Clip tuning), the first reward's moments first (most pages share them).

    Every argument is the page's own default: the global settings' (``state.DEFAULTS``), the page controls'
    (``state.PAGE_CONTROLS``) and the choices the pages derive from them (:mod:`.page_defaults`),
    passed in the page's order, so each call hits the cache entry the page reads
    (``tests/test_dashboard_warmup.py`` opens every page afterwards and counts what is computed anew). The moments
    over every policy are noted as planned (:func:`~dashboard.data.dataset_moments.note_prepared_later`): a page of one target
    policy waits for them instead of reducing its policy alone. A propensity
    target policy's steps read the importance moments of the logged propensities (``PROPENSITY_CONTROLS``)."""
    from dashboard.state import DEFAULTS as D
    from dashboard.state import PROPENSITY_CONTROLS
    from offeval_core.importance.weights import PROPENSITY

    key = ds.key
    rewards = sensitivity_rewards(ds, reward, True)  # every reward that is ever positive
    arms = ds.has_arms
    propensity = ds.targets.kind(policy) == "propensity"
    # the target policy's models: a propensity policy's estimators read the logged propensities (D = D0 = propensity)
    d, e = (PROPENSITY, PROPENSITY) if propensity else (D.discount, D.exposure)

    def control(name: str):
        return PROPENSITY_CONTROLS[name] if propensity and name in PROPENSITY_CONTROLS else D.control(name)

    def moments_step(label: str, r: str, discount: str, exposure: str) -> tuple[str, Callable[[], object]]:
        note_prepared_later(key, r, discount, exposure)  # a page waits for these rather than reducing one policy alone
        return label, lambda: moments(key, r, discount, exposure)

    steps: list[tuple[str, Callable[[], object]]] = [
        ("data summary", lambda: (reward_overview(key), max_rank(key), learnt_pbm(key))),
        *(moments_step(f"moments of {r}", r, D.discount, D.exposure) for r in dict.fromkeys((reward, *rewards)))]
    if propensity:
        steps += [(f"propensity moments of {r}", lambda r=r: propensity_moments(key, r))
                  for r in dict.fromkeys((reward, *rewards))]
    if policy and arms and rewards:
        pooled = sensitivity_rewards(ds, reward, control("sens_all"))
        def sensitivity_views():
            """The page's default view and, when that has no setting, the other side (the page offers it)."""
            side = control("sens_side")
            args = (key, pooled, d, e, policy, tuple(control("sens_metrics")), D.level, control("sens_alpha"),
                    control("sens_eff"))
            res = sensitivity_result(*args, side, control("sens_adj"))
            if not len(res.settings):
                other = "negatives" if side == "improvements" else "improvements"
                sensitivity_result(*args, other, control("sens_adj"))
            return res

        steps.append(("sensitivity", sensitivity_views))
    if policy and arms and len(ds.days) >= 3:
        variants = tuple(tuple(v) for v in correlation_variants(d, D.clip))
        if not propensity:
            steps.append(moments_step(f"moments of {reward} (log2)", reward, "log2", "log2"))
        steps.append(("correlation", lambda: correlation_result(key, reward, variants, D.method, policy)))
        if not propensity:
            steps.append(("Table 2 across clips", lambda: correlation_clip_result(key, reward, "pbm", D.method,
                                                                                  policy)))
    if len(ds.policies) >= 2:
        steps.append(("DCG vs nDCG", lambda: agreement_result(key, reward, agreement_policies(ds), D.discount,
                                                              D.exposure, D.clip, D.level, control("agr_boot"))))
    if policy and arms:
        ests = tuple(tuple(v) for v in decision_estimators(d, D.clip, exposure=e))
        steps.append(("decisions", lambda: decision_result(key, reward, policy, ests, D.level, control("dec_rel"),
                                                           control("dec_adj"))))
    if policy:
        steps.append(("clip tuning", lambda: clip_tuning_result(key, reward, policy, d, e, D.level,
                                                                control("clip_rule"))))
    if candidate_policies(key):
        steps.append(("candidates", lambda: candidates_result(
            key, reward, D.discount, D.exposure, D.level, control("cand_adj"), control("cand_clip"), D.clip,
            control("cand_rank"), control("cand_prop"))))
    return steps


def _run(job: Warmup) -> None:
    while True:
        wait_for_idle()
        if (step := job._next()) is None:
            return
        label, call = step
        try:
            call()
        except Exception as exc:  # a page shows its own error when it asks for the same result
            job.failed.append(label)
            _LOG.info("background preparation of %s failed: %s", label, exc)
        job.done += 1


def _of_page(label: str, page: str) -> bool:
    """Whether the preparation step ``label`` computes something the page at url path ``page`` shows: the
    recommended clip under the sidebar's slider (:func:`dashboard.state.recommends_clip`) is the clip-tuning
    result."""
    from dashboard.state import recommends_clip

    own_moments = label.startswith(("moments of ", "propensity moments of ")) and not label.endswith("(log2)")
    if label == "clip tuning" and recommends_clip(page):
        return True
    return {
        "data": label == "data summary",
        "sensitivity": own_moments or label == "sensitivity",
        "correlation": label.endswith("(log2)") or label in ("correlation", "Table 2 across clips"),
        "dcg-vs-ndcg": label == "DCG vs nDCG",
        "decisions": label == "decisions",
        "clip-tuning": label == "clip tuning",
        "candidates": label == "candidates",
    }.get(page, False)


def page_first(todo: list[tuple[str, Callable[[], object]]], page: str) -> list[tuple[str, Callable[[], object]]]:
    """The steps of the page the user is on (url path ``page``; ``""`` is the Data page) first, the others after
    them, each group in its own order.

    >>> [label for label, _ in page_first([("data summary", 0), ("moments of a", 0), ("clip tuning", 0)],
    ...                                   "clip-tuning")]
    ['clip tuning', 'data summary', 'moments of a']
    """
    page = page or "data"
    return [s for s in todo if _of_page(s[0], page)] + [s for s in todo if not _of_page(s[0], page)]


def warm_up(ds: Dataset, *, reward: str, policy: str | None, page: str = "") -> Warmup | None:
    """Start preparing ``ds``'s pages in the background (once per dataset key and server process), the steps of
    the page the user is on (url path ``page``) first, and put them first again whenever the user opens another
    page while it runs; return its progress. Nothing for a moments file (nothing
    heavy to prepare) or outside a running server."""
    if ds.is_moments or not _serving() or not enabled():
        return None
    with _LOCK:
        job = _JOBS.get(ds.key)
        if job is not None:
            job.put_first(page)  # (started at server start, or by another page: this page's steps next)
            return job
        try:
            todo = page_first(steps(ds, reward, policy), page)
        except LookupError as exc:  # the upload is gone from the server's store: the page says so itself
            _LOG.info("no background preparation of %s: %s", ds.key, exc)
            return None
        job = _JOBS[ds.key] = Warmup(tuple(label for label, _ in todo), _todo=list(todo))
        threading.Thread(target=_run, args=(job,), name="offeval-prepare", daemon=True).start()
        return job


def prefetch(key: str) -> list[str]:
    """At server start, before the first user: load dataset ``key`` (the demo, or the file the server was started
    on), read the default moments of every reward (D = D0 = pbm) that the persistent moments cache holds into the
    caches the pages read, and start the background preparation (:func:`warm_up`, at the navigation's order); return
    the rewards read. The preparation computes what the cache lacks while the server waits for its first user (on
    the first start, the demo's default moments: every later start reads them) and starts no step while a page
    runs (:func:`page_running`), so a page opened at once computes what it needs itself, alone; the first
    session's :func:`warm_up` finds it started and puts that page's steps first. A dataset that fails to load is
    left to the page, which shows the error; so is an unreadable entry (the page computes it)."""
    from dashboard.state import DEFAULTS as D
    from offeval_core.moments_cache import MomentsCache, logs_key

    try:
        ds = load(key)
        if ds.is_moments:
            return []
        store = MomentsCache.from_env()
        reward, policy = default_choices(ds)
        read = []
        for r in ds.rewards if store is not None else ():
            if store.path(logs_key(ds.logs, default_grid(ds.logs, r, D.discount, D.exposure))).is_file():
                moments(ds.key, r, D.discount, D.exposure)
                read.append(r)
                if r == reward:
                    _recommend(ds, reward, policy)
        warm_up(ds, reward=reward, policy=policy)
        return read
    except Exception as exc:  # the page loads it again and shows what went wrong
        _LOG.info("no prefetch of %s: %s", key, exc)
        return []


def _recommend(ds: Dataset, reward: str, policy: str | None) -> None:
    """The default settings' recommended clip (``clip_recommendation``), which the sidebar of every page with the clip
    slider shows before its run ends: computed from the moments just read (0.2–0.3 s on the demo, and about 1 s of a
    first page's run after a restart, which shares the interpreter with the server's start)."""
    from dashboard.data.analyses import clip_recommendation
    from dashboard.data.datasets import mark_ready
    from dashboard.data.page_defaults import recommendation_args
    from dashboard.state import DEFAULTS as D

    args = recommendation_args(ds, reward, policy, D.discount, D.exposure, D.level)
    if isinstance(args, str) or ds.targets.kind(policy) == "propensity":  # (its moments are not read here)
        return
    try:
        clip_recommendation(*args)
    except Exception as exc:  # the sidebar computes it again and says why there is none
        _LOG.info("no prefetched recommendation for %s: %s", ds.key, exc)
        return
    mark_ready("clip recommendation", *args)


def enabled(environ=None) -> bool:
    """Whether the background preparation runs: on unless ``OFFEVAL_PREPARE=0`` (the test suite turns it off,
    so the servers its browser tests start spend the two cores on the test, not on every page's defaults).

    >>> enabled({"OFFEVAL_PREPARE": "0"}), enabled({})
    (False, True)
    """
    env = os.environ if environ is None else environ
    return env.get("OFFEVAL_PREPARE", "1").strip() != "0"


def _serving() -> bool:
    """True under ``streamlit run``: a real runtime (AppTest installs a mock one, whose threads would outlive
    the test and compete with it)."""
    from streamlit.runtime import Runtime

    return Runtime.exists() and type(Runtime.instance()) is Runtime


def progress(key: str) -> Warmup | None:
    """The background preparation of dataset ``key``, if one was started."""
    return _JOBS.get(key)
