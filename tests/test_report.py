import argparse
import re

import pytest
from analyses_world import small_world

from offeval_core import cli
from offeval_core.commands import report as report_cmd
from offeval_core.errors import SpecError, UnknownName

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _run(argv):
    parser = argparse.ArgumentParser(prog="offeval")
    report_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["report", *argv])
    return args.func(args)


@pytest.fixture(scope="module")
def report_file(tmp_path_factory):
    world, _, _ = small_world()
    d = tmp_path_factory.mktemp("report")
    logs = d / "logs.parquet"
    world.logs.to_parquet(logs)
    out = d / "report.html"
    assert _run([str(logs), "--out", str(out), "--reward", "like", "--clip-grid", "1,4,64,inf", "--n-boot", "50",
                 "--no-progress"]) == 0
    return out


def test_report_is_registered():
    assert "report" in cli.COMMANDS


def test_report_is_self_contained_with_all_sections(report_file):
    text = report_file.read_text(encoding="utf-8")
    for anchor in ("settings", "data", "sensitivity", "correlation", "dcg-ndcg", "decisions", "clip-tuning"):
        assert f'id="{anchor}"' in text or f"id='{anchor}'" in text
    assert not re.search(r"<script[^>]+src=", text)          # plotly.js is inline, nothing fetched
    assert "Plotly.newPlot" in text and len(text) > 3_000_000   # the plotly.js bundle is embedded
    # the small world has no online improvement at p < 0.001 (200 sessions per arm and day): the sensitivity
    # section says there is nothing to detect and draws no figure, so 9 figures (never the negatives instead)
    assert text.count('class="fig"') == 9
    sens = text[text.index('id="sensitivity"'):text.index('id="correlation"')]
    assert "nothing to detect" in sens and 'class="fig"' not in sens
    assert "Online negatives: negatives detected (a separate view, not part of the TPR)" in sens
    assert "1, 4, 64, ∞" in text                             # the clip grid used is printed


def test_report_shows_table_2_across_clip_values_as_the_core_computes_it(report_file):
    import html
    import math

    from offeval_core.analyses import correlation_by_clip
    from offeval_core.engine import Grid, reduce
    from offeval_core.logs import read_logs

    text = report_file.read_text(encoding="utf-8")
    logs = read_logs(report_file.parent / "logs.parquet")
    clips = (1.0, 4.0, 64.0, math.inf)
    m = reduce(logs, Grid(rewards=("like",), policies=("treatment",), discounts=("pbm", "log2"),
                          exposures=("pbm", "log2"), clips=clips))
    assert "<h3>Table 2 across clip values</h3>" in text
    assert html.escape(correlation_by_clip(m, reward="like").takeaway) in text


def test_heldout_section_is_off_by_default(report_file):
    text = report_file.read_text(encoding="utf-8")
    assert 'id="heldout"' not in text and "off (--heldout)" in text


def test_heldout_section_renders_the_zoo_agreement(report_file, tmp_path):
    from offeval_core.heldout.analyses import zoo_agreement

    out = tmp_path / "heldout.html"
    logs = report_file.parent / "logs.parquet"
    assert _run([str(logs), "--out", str(out), "--reward", "like", "--clip-grid", "1,inf", "--n-boot", "50",
                 "--heldout", "--heldout-grid", "small", "--heldout-k", "50", "--heldout-cache", str(tmp_path / "zoo"),
                 "--no-progress"]) == 0
    text = out.read_text(encoding="utf-8")
    assert 'id="heldout"' in text and "DCG@50 vs nDCG@50 over a simulated model zoo" in text
    assert text.count('class="fig"') == 10                   # the 9 of the default report + the App. A scatter
    # the numbers are those of the core computed directly (same grid, k, resamples and seed)
    direct = zoo_agreement(grid="small", k=50, n_boot=50, seed=0)
    a = direct.agreement
    assert f"of the {a.n_pairs} pairs of the 25 models" in text
    assert f"Pearson r = {a.pearson_r:.2f}, Kendall τ = {a.kendall_tau:.2f}" in text
    assert f"nDCG@50 orders {a.inverted_share:.0%} of the" in text
    assert "App. A reports r ≈ 0.6, τ ≈ 0.5 and ≈ 25% over 192 models on MovieLens-1M" in text
    assert "simulated zoo, small grid, k = 50" in text       # printed in the settings table
    assert [p.suffix for p in (tmp_path / "zoo").iterdir()] == [".npz"]


def test_heldout_options_are_checked(report_file):
    from offeval_core.logs import read_logs
    from offeval_core.report import build_report

    logs = read_logs(report_file.parent / "logs.parquet")
    with pytest.raises(ValueError, match="heldout_grid must be one of 'small', 'default'; got 'huge'"):
        build_report(logs, heldout=True, heldout_grid="huge")
    with pytest.raises(ValueError, match="heldout_k must be an integer cut-off from 1 to 100, got 500"):
        build_report(logs, heldout=True, heldout_k=500)


def test_a_cut_off_discount_is_refused_before_any_work(report_file, tmp_path):
    """The report's discount is also its exposure model (D = D0): 'log2@10' would give every rank after 10 an
    exposure of 0. Refused by name, for logs and for a moments file, and no report is written."""
    from offeval_core.logs import read_logs
    from offeval_core.report import build_report

    said = (r"^the report uses --discount as both the discount D and the exposure model D0 \(D = D0\); 'log2@10' has a "
            r"cut-off, which gives every rank after it an exposure of 0, so it cannot be an exposure model: use it "
            r"without '@n', or compare a cut-off D with `offeval estimate --discount … --exposure …` or the "
            r"dashboard's Correlation page$")
    with pytest.raises(SpecError, match=said):
        build_report(read_logs(report_file.parent / "logs.parquet"), discount="log2@10")
    with pytest.raises(SpecError, match=said):
        build_report(object(), discount=" log2@10 ")
    out = tmp_path / "r.html"
    with pytest.raises(SpecError, match=said):
        _run([str(report_file.parent / "logs.parquet"), "--out", str(out), "--discount", "log2@10", "--no-progress"])
    assert not out.exists()


def test_the_target_policy_is_said_only_once_the_arguments_are_accepted(report_file, tmp_path, capsys):
    """A refused argument stops the report before it says which target policy it takes; an accepted run says it
    once, first."""
    logs = str(report_file.parent / "logs.parquet")
    with pytest.raises(SpecError):
        _run([logs, "--out", str(tmp_path / "r.html"), "--discount", "log2@10", "--no-progress"])
    assert "target policy" not in capsys.readouterr().err
    _run([logs, "--out", str(tmp_path / "ok.html"), "--no-progress"])
    err = capsys.readouterr().err
    assert err.count("offeval report: target policy treatment, taken to have served the treatment arm") == 1
    assert err.startswith("offeval report: target policy treatment")


def test_cli_errors_name_the_argument(tmp_path):
    with pytest.raises(ValueError, match="clip must be a number ≥ 1 or 'inf', got 'x'"):
        _run(["logs.parquet", "--out", str(tmp_path / "r.html"), "--clip-grid", "1,x"])


@pytest.mark.browser
def test_report_renders_every_figure_in_chromium(report_file):
    from playwright.sync_api import sync_playwright

    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(report_file.as_uri())
            n = page.locator("div.fig").count()
            page.wait_for_function(f"document.querySelectorAll('div.fig .main-svg').length >= {n}", timeout=30000)
            rendered = page.evaluate("Array.from(document.querySelectorAll('div.fig .js-plotly-plot'))"
                                     ".filter(d => d.querySelector('.main-svg') && d._fullData).length")
            titles = page.evaluate("Array.from(document.querySelectorAll('div.fig .gtitle'))"
                                   ".map(e => e.textContent)")
        finally:
            browser.close()
    # 9 figures: the sensitivity section draws none on the small world (no online improvement at p < 0.001)
    assert n == 9 and rendered == n
    assert not any(t.startswith("Offline sensitivity vs clipping") for t in titles)
    assert any(t.startswith("Table 2 across clip values — like") for t in titles)
    assert errors == []


@pytest.mark.browser
def test_static_export_png_and_svg(tmp_path):
    import plotly.graph_objects as go

    from offeval_core.export import export_figures

    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
    paths = export_figures({"one": fig, "two": fig}, tmp_path, formats=("png", "svg"), width=400)
    assert [p.name for p in paths] == ["one.png", "one.svg", "two.png", "two.svg"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in paths[1].read_bytes()[:200]


def _section(text: str, anchor: str, nxt: str) -> str:
    return text[text.index(f'id="{anchor}"'):text.index(f'id="{nxt}"')]


def test_report_from_a_moments_file(report_file, tmp_path):
    """``offeval report`` on a moments file (``offeval reduce``): the moments-only sections equal those of the
    report on the logs (two code paths: in-memory reduce vs DuckDB over Parquet), the others are notices."""
    from offeval_core.commands import reduce as reduce_cmd

    logs = report_file.parent / "logs.parquet"
    parser = argparse.ArgumentParser(prog="offeval")
    reduce_cmd.register(parser.add_subparsers(dest="command"))
    mpath = tmp_path / "moments.parquet"
    args = parser.parse_args(["reduce", str(logs), "--out", str(mpath), "--rewards", "like", "--policies",
                              "treatment", "--discounts", "pbm", "--exposures", "pbm", "--clips", "1,4,64,inf"])
    assert args.func(args) == 0
    out = tmp_path / "from_moments.html"
    assert _run([str(mpath), "--out", str(out), "--n-boot", "50", "--no-progress"]) == 0   # the file's clip grid
    text = out.read_text(encoding="utf-8")
    full = report_file.read_text(encoding="utf-8")
    assert "<th>input</th><td>moments file: sections that need the raw logs" in text
    assert "1, 4, 64, ∞" in text
    # sensitivity: same takeaway and table as the report computed from the logs
    sens, sens_full = _section(text, "sensitivity", "correlation"), _section(full, "sensitivity", "correlation")
    take = re.search(r'<p class="takeaway">(.*?)</p>', sens).group(1)
    assert take == re.search(r'<p class="takeaway">(.*?)</p>', sens_full).group(1)
    assert ("<table" in sens) == ("<table" in sens_full)
    if "<table" in sens:
        assert sens[sens.index('<table'):].split("</table>")[0] == sens_full[sens_full.index('<table'):].split("</table>")[0]
    # rows-only sections are notices
    assert "DCG vs nDCG over the logged policies (per-session values and a bootstrap over sessions) needs the raw " \
           "logs" in text
    assert "Clip tuning (the bias bound, ESS and clipped share read per-row weights) needs the raw logs" in text
    assert "The learnt position-bias curve (session survival per rank) needs the raw logs" in text
    assert "Run `offeval report LOGS` on the logs themselves" in text
    # figures: sensitivity 0 (no online improvement at p < 0.001) + correlation 2 (table chart, one series) +
    # decisions 3 (the default estimators at m = ∞: DCG on raw labels, DCG and nDCG de-biased)
    assert text.count('class="fig"') == 5
    dec = _section(text, "decisions", "clip-tuning")
    assert "log₂" not in dec and "log2" not in dec


def test_report_from_a_moments_file_checks_its_grid(tmp_path, report_file):
    from offeval_core.commands import reduce as reduce_cmd
    from offeval_core.moments_io import read_moments
    from offeval_core.report import build_report

    parser = argparse.ArgumentParser(prog="offeval")
    reduce_cmd.register(parser.add_subparsers(dest="command"))
    mpath = tmp_path / "m.parquet"
    args = parser.parse_args(["reduce", str(report_file.parent / "logs.parquet"), "--out", str(mpath), "--rewards",
                              "like", "--policies", "treatment", "--discounts", "pbm", "--clips", "1,inf"])
    assert args.func(args) == 0
    m = read_moments(mpath)
    with pytest.raises(UnknownName, match=r"^discount 'log2' \(D = D0, in the moments file\) was not computed; "
                                          r"available: pbm$"):
        build_report(m, discount="log2")
    with pytest.raises(UnknownName, match=r"^reward 'watch_time' \(in the moments file\) was not computed; available: like$"):
        build_report(m, rewards=["watch_time"])
    with pytest.raises(UnknownName, match=r"^clip 64 \(q_clip, in the moments file\) was not computed; available: 1, inf$"):
        build_report(m, q_clip=64.0)


def test_adjust_takes_the_report_on_adjusted_p_values_like_the_pages(report_file, tmp_path):
    """``--adjust holm``: the sensitivity section is the core's Holm-adjusted result on the same moments, and
    the decision section says the decisions are on adjusted p-values; the default report says it is unadjusted."""
    import html
    import math

    from offeval_core.analyses import sensitivity
    from offeval_core.engine import Grid, reduce
    from offeval_core.logs import read_logs

    logs_path = report_file.parent / "logs.parquet"
    out = tmp_path / "holm.html"
    assert _run([str(logs_path), "--out", str(out), "--reward", "like", "--clip-grid", "1,4,64,inf", "--n-boot",
                 "50", "--adjust", "holm", "--online-alpha", "0.5", "--no-progress"]) == 0
    text = out.read_text(encoding="utf-8")
    m = reduce(read_logs(logs_path), Grid(rewards=("like",), policies=("treatment",), clips=(1.0, 4.0, 64.0, math.inf)))
    res = sensitivity(m, adjust="holm", online_alpha=0.5)
    assert res.family_size > 1
    assert html.escape(res.takeaway) in text and html.escape(res.adjustment) in text
    assert "Detections on adjusted one-sided p-values, Holm (family-wise error)" in text
    assert "Decisions on adjusted p-values, Holm (family-wise error) at α = 0.01" in text
    assert "<th>multiple testing (sensitivity, decisions)</th><td>Holm (family-wise error)</td>" in text
    plain = report_file.read_text(encoding="utf-8")
    assert "<th>multiple testing (sensitivity, decisions)</th><td>unadjusted</td>" in plain
    assert "Unadjusted: each of the" in plain and "adjusted p-values, Holm" not in plain


def test_report_adjust_is_checked(report_file):
    from offeval_core.logs import read_logs
    from offeval_core.report import build_report

    logs = read_logs(report_file.parent / "logs.parquet")
    with pytest.raises(ValueError, match="adjust must be one of 'none', 'holm', 'bh'; got 'bonferroni'"):
        build_report(logs, adjust="bonferroni")
    with pytest.raises(SystemExit):
        _run(["logs.parquet", "--out", "r.html", "--adjust", "bonferroni"])
