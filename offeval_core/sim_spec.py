"""A simulated world as it is named from outside: the Data page's widgets, a shared link's ``sim=`` spec
(``demo;seed=7;days=5;cascade``) and ``offeval simulate``'s options, all checked here with the same caps.

:data:`SIM_LIMITS` bounds each option (the widgets use the same numbers); :func:`check_world_size` bounds
the product, the memory the world takes once simulated and validated, by the input limit
``OFFEVAL_MAX_MEMORY`` (:func:`~offeval_core.limits.load_memory`), so a link cannot make the server simulate
millions of sessions: ``demo;sessions=1000000;days=365`` is refused before a session is drawn.
"""

from __future__ import annotations

from collections.abc import Sequence

from offeval_core.errors import LimitExceeded, SpecError
from offeval_core.limits import Limits, load_memory
from offeval_core.simulate_config import SimulationConfig, preset_config, true_survival

__all__ = [
    "SIM_LIMITS", "SIM_PRESETS", "SIM_SWITCHES", "check_sim_option", "check_world_size", "parse_sim_spec",
    "sim_spec", "simulated_config", "world_size",
]

SIM_PRESETS = ("small", "demo")
"""The presets a link or the Data page may name (``large`` is for ``offeval simulate`` only)."""
SIM_SWITCHES = ("cascade", "reward_interactions", "contextual_position_bias")
SIM_LIMITS: dict[str, tuple[int, int, str]] = {
    "sessions": (1, 20_000, "sessions per arm and day"),
    "days": (1, 30, "days"),
    "support": (1, 60, "support depth, the deepest rank anyone scrolls to"),
    "seed": (0, 2**32 - 1, "random seed"),
}
"""(smallest, largest, meaning) of every option of a simulated world."""
_FIELDS = {"sessions": "sessions_per_arm_day", "days": "n_days", "support": "support_depth"}


def check_sim_option(name: str, value, *, shown: str | None = None) -> int:
    """``value`` as an integer within :data:`SIM_LIMITS`; SpecError naming the option as ``shown``
    (default: its name in a spec) otherwise.

    >>> check_sim_option("days", 5)
    5
    """
    lo, hi, meaning = SIM_LIMITS[name]
    label = shown or f"simulation option {name!r}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(f"{label} needs an integer, got {str(value)[:40]!r}", source=label,
                        expected=f"{lo:,}…{hi:,} ({meaning})")
    if not lo <= value <= hi:
        raise SpecError(f"{label} must be between {lo:,} and {hi:,} ({meaning}), got {value:,}", source=label,
                        expected=f"{lo:,}…{hi:,}")
    return value


def sim_spec(preset: str = "small", seed: int = 1, *, sessions: int | None = None, days: int | None = None,
             switches: Sequence[str] = (), support_depth: int | None = None) -> str:
    """Canonical text of a simulation request, used in the URL and as the cache key.

    >>> sim_spec("small", 7, switches=["cascade"], days=5)
    'small;seed=7;days=5;cascade'
    """
    parts = [preset, f"seed={int(seed)}"]
    if sessions:
        parts.append(f"sessions={int(sessions)}")
    if days:
        parts.append(f"days={int(days)}")
    if support_depth:
        parts.append(f"support={int(support_depth)}")
    parts += [s for s in SIM_SWITCHES if s in switches]
    return ";".join(parts)


def parse_sim_spec(spec: str) -> dict:
    """Inverse of :func:`sim_spec`, every option within :data:`SIM_LIMITS`; SpecError naming the bad part.

    >>> parse_sim_spec("small;seed=7;days=5;cascade")["overrides"]
    {'n_days': 5, 'cascade': True}
    """
    text = str(spec)[:200]
    parts = [p.strip() for p in text.split(";") if p.strip()]
    if not parts or parts[0] not in SIM_PRESETS:
        raise SpecError(f"simulation spec must start with a preset ({', '.join(SIM_PRESETS)}), got {text[:60]!r}",
                        source="sim")
    out = {"preset": parts[0], "seed": 1, "overrides": {}}
    for p in parts[1:]:
        key, eq, value = p.partition("=")
        if not eq:
            if key not in SIM_SWITCHES:
                raise SpecError(f"unknown simulation switch {key[:40]!r}; known: {', '.join(SIM_SWITCHES)}",
                                source="sim")
            out["overrides"][key] = True
            continue
        if key not in SIM_LIMITS:
            raise SpecError(f"unknown simulation option {key[:40]!r}; known: {', '.join(SIM_LIMITS)}", source="sim")
        try:
            number = int(value) if len(value) <= 20 else None
        except ValueError:
            number = None
        number = check_sim_option(key, number if number is not None else value)
        if key == "seed":
            out["seed"] = number
        else:
            out["overrides"][_FIELDS[key]] = number
    return out


def world_size(config: SimulationConfig) -> tuple[int, int, int]:
    """(sessions, expected logged rows, columns) of a simulated world: every experiment × day × arm has
    ``sessions_per_arm_day`` sessions (at most ``1 + traffic_drift`` times that on a busy day), each as long
    as the deeper segment's mean viewed length Σ S(r)."""
    sessions = round(config.n_experiments * config.n_days * 2 * config.sessions_per_arm_day
                     * (1 + config.traffic_drift))
    mean_length = max(float(true_survival(config, segment=s).sum()) for s in ("guest", "registered"))
    columns = 7 + len(config.rewards) + len(config.policies)  # ids, rank, day, experiment, arm, segment
    return sessions, round(sessions * mean_length), columns


def check_world_size(config: SimulationConfig, *, limits: Limits | None = None, spec: str = "") -> None:
    """LimitExceeded when the world would take more than ``max_memory`` once simulated and validated."""
    limits = limits or Limits.from_env()
    sessions, rows, columns = world_size(config)
    need = load_memory(rows, columns, rows * columns * 8)
    if need > limits.max_memory:
        raise LimitExceeded(
            f"the simulated world {spec[:80]!r} would have up to {rows:,} impressions ({config.n_experiments} "
            f"experiments × {config.n_days} days × 2 arms × {config.sessions_per_arm_day:,} sessions, more on busy "
            f"days, of about {rows / sessions:.1f} impressions each) and take about {need / 2**30:.1f} GiB of "
            "memory, more than the limit "
            f"{limits.max_memory:,} bytes (OFFEVAL_MAX_MEMORY); ask for fewer sessions or days",
            source="sim", expected=f"at most {limits.max_memory:,} bytes")


def simulated_config(spec: str, *, limits: Limits | None = None) -> tuple[SimulationConfig, int]:
    """(configuration, seed) of a spec, every option and the world's size checked."""
    parsed = parse_sim_spec(spec)
    try:
        config = preset_config(parsed["preset"], **parsed["overrides"])
    except ValueError as exc:  # e.g. a support depth deeper than the preset's candidates
        raise SpecError(f"simulation spec {str(spec)[:60]!r}: {exc}", source="sim") from None
    check_world_size(config, limits=limits, spec=str(spec))
    return config, parsed["seed"]
