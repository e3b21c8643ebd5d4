"""Refresh the generated blocks of the benchmarks' pages and of the project README from benchmarks/results/.

benchmarks/README.md and the pages in benchmarks/docs/ are written by hand (what each result means, and its
history); only the blocks between `<!-- name:begin -->` and `<!-- name:end -->` are this script's: `summary`
in benchmarks/README.md (every quality run's table and the plots) and `tables` in benchmarks/docs/tables.md
(the before/after comparisons, then every `results/*.md`). The project README's blocks: the compact quality
table, the container images, the torch-free environment and the documents API. Run it after a benchmark has
written its results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hybridrag.benchmarks.common import RESULTS, markdown_table
from hybridrag.indexing.models.embedders import DEFAULT_EMBEDDING_MODEL as DEFAULT_MODEL


def quality_reports(model: str | None = None) -> list[dict[str, Any]]:
    """Every `bench quality` run in results/ (of one embedding model when given), by file name. Other files
    named `quality-*.json` (a before/after comparison written by hand) are not runs and are left out."""
    reports = []
    for path in sorted(RESULTS.glob(f"quality-*-{model}.json" if model else "quality-*.json")):
        report = json.loads(path.read_text("utf-8"))
        if report.get("benchmark") == "quality" and isinstance(report.get("results"), dict):
            reports.append(report)
    return reports


def summary(model: str | None = None) -> str:
    """nDCG@10 / Recall@5 / Recall@100 of every quality result (of one embedding model when given)."""
    rows = []
    for report in quality_reports(model):
        for system, result in report["results"].items():
            m = result["metrics"]
            rows.append(
                [
                    f"{report['dataset']} ({report['split']})",
                    report["config"]["embeddingModel"],
                    system,
                    m["ndcg@10"],
                    m["recall@5"],
                    m["recall@100"],
                    result["p50ms"],
                ]
            )
    return markdown_table(["dataset", "model", "system", "nDCG@10", "R@5", "R@100", "p50 ms"], rows)


README_SYSTEMS = ("keyword", "semantic", "graph", "keyword+semantic", "hybrid", "bm25s (reference)")


def compact_summary(model: str = DEFAULT_MODEL) -> str:
    """One row per dataset: each system's nDCG@10 / Recall@5 (the README's table)."""
    rows = []
    for report in quality_reports(model):
        if report["dataset"].endswith(("-lower", "-upper")):
            continue  # the recased copies are in benchmarks/README.md's summary
        cells = []
        for system in README_SYSTEMS:
            m = report["results"].get(system, {}).get("metrics")
            cells.append(f"{m['ndcg@10']:.3f} / {m['recall@5']:.3f}" if m else "—")
        rows.append([f"{report['dataset']} ({report['split']}, {report['queries']} q)", *cells])
    return markdown_table(["dataset (nDCG@10 / R@5)", *README_SYSTEMS], rows)


GRAPH_SYSTEMS = ("keyword", "semantic", "graph", "keyword+semantic", "hybrid")


def graph_before_after(model: str = DEFAULT_MODEL) -> str:
    """Each dataset's systems before the passage-entity graph (results/before-graph/, kept as they were
    measured) and now: nDCG@10, R@2, R@5, R@100."""
    rows = []
    for before_path in sorted((RESULTS / "before-graph").glob(f"quality-*-{model}.json")):
        after_path = RESULTS / before_path.name
        if not after_path.is_file():
            continue
        before = json.loads(before_path.read_text("utf-8"))
        after = json.loads(after_path.read_text("utf-8"))
        if after.get("date") == before.get("date"):
            continue  # not re-measured since: there is no "after" yet
        for system in GRAPH_SYSTEMS:
            if system not in before["results"] or system not in after["results"]:
                continue
            b, a = before["results"][system]["metrics"], after["results"][system]["metrics"]
            row: list[object] = [f"{after['dataset']} ({after['split']})", system]
            for metric in ("ndcg@10", "recall@2", "recall@5", "recall@100"):
                row += [b[metric], a[metric]]
            rows.append(row)
    if not rows:
        return ""
    headers = ["dataset", "system"]
    for metric in ("nDCG@10", "R@2", "R@5", "R@100"):
        headers += [f"{metric} before", f"{metric} after"]
    return (
        "### Graph retrieval before and after passage nodes and dense seeds\n\n"
        "Same command (`hybridrag bench quality`), same indexes; before = the entity-only graph "
        "(results/before-graph/), after = the current code.\n\n" + markdown_table(headers, rows)
    )


def build_encoder_comparison() -> str:
    """nDCG@10 and R@5 of indexes whose passages another encoder embedded (results/build-encoder/, written by
    `bench quality --build-encoders onnx`) beside the torch-built index of the same run and query path."""
    rows = []
    reports = [
        json.loads(p.read_text("utf-8")) for p in sorted((RESULTS / "build-encoder").glob("quality-*.json"))
    ]
    for report in reports:
        results = report["results"]
        for encoder, build in (report.get("otherBuilds") or {}).items():
            for system in ("semantic", "hybrid"):
                torch, other = results.get(system), results.get(f"{system}[built:{encoder}]")
                if torch is None or other is None:
                    continue
                t, o = torch["metrics"], other["metrics"]
                embed_s = (build or {}).get("seconds", {}).get("embed")
                rows.append(
                    [
                        f"{report['dataset']} ({report['split']}, {report['queries']} queries)",
                        system,
                        encoder,
                        t["ndcg@10"],
                        o["ndcg@10"],
                        f"{o['ndcg@10'] - t['ndcg@10']:+.4f}",
                        t["recall@5"],
                        o["recall@5"],
                        embed_s if embed_s is not None else "cached",
                    ]
                )
    if not rows:
        return ""
    dates = sorted({r["date"][:10] for r in reports})
    headers = ["dataset", "system", "built by", "nDCG@10 torch-built", "nDCG@10", "delta"]
    headers += ["R@5 torch-built", "R@5", "embed s"]
    return (
        f"### Indexes built by the int8 ONNX passage encoder — {', '.join(dates)}\n\n"
        "`hybridrag bench quality --strategies semantic,hybrid --build-encoders onnx`: the same corpus built "
        "twice (torch, and `index build --encoder onnx`), searched the same way (the service's query encoder). "
        "embed s: the onnx build's passage and entity embedding.\n\n" + markdown_table(headers, rows)
    )


def _replace_block(text: str, name: str, body: str) -> str:
    """`text` with the block `name` holding `body` (unchanged while there is nothing to put there).

    Raises:
        ValueError: the text lacks the block's markers, which would otherwise leave its figures stale unsaid.
    """
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"expected one {begin} ... {end} block")
    if not body:
        return text
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    return head + begin + body + end + tail


def refresh(path: Path, blocks: dict[str, str]) -> None:
    """Replace the named blocks of the file at `path`; the text around them is left as written."""
    text = path.read_text("utf-8")
    for name, body in blocks.items():
        try:
            text = _replace_block(text, name, body)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    path.write_text(text, "utf-8")


def image_sentence() -> str:
    """The container images measured by scripts/image-test.sh, in one sentence."""
    parts = []
    for path in sorted(RESULTS.glob("image*.json")):
        r = json.loads(path.read_text("utf-8"))
        # Reports from before the script removed its layers after each run do not say; their builds had them.
        cache = "dependency layers cached" if r.get("layersCached", True) else "no layer cache"
        parts.append(
            f"`VARIANT={r.get('variant', 'server')}` {r['sizeBytes'] / 1e9:.2f} GB, built in {r['buildSeconds']} s "
            f"({cache}), ready {r['readySeconds']} s after start"
        )
    return "; ".join(parts)


def torch_free_sentence() -> str:
    path = RESULTS / "torch-free.json"
    if not path.is_file():
        return ""
    r = json.loads(path.read_text("utf-8"))
    lite, full = r["torchFree"], r.get("full")
    text = (
        f"the `server-onnx` environment takes {lite['sitePackagesMB'] / 1000:.2f} GB, starts (to `/readyz` 200) "
        f"in {lite['coldStartSeconds']} s and holds {lite['rssMB']:.0f} MB resident"
    )
    if full:
        text += (
            f"; this checkout's full `.venv` (torch, dev tools) {full['sitePackagesMB'] / 1000:.2f} GB, "
            f"{full['coldStartSeconds']} s, {full['rssMB']:.0f} MB on the same index"
        )
    return text


def documents_sentence() -> str:
    paths = sorted(RESULTS.glob("documents-*.json"))
    if not paths:
        return ""
    r = json.loads(paths[-1].read_text("utf-8"))
    rates = ", ".join(
        f"{w['documentsPerSecond']}/s at {w['documentsPerRequest']} per request" for w in r["writes"]
    )
    search = r["search"]
    return (
        f"{r['dataset']} abstracts with {r['config']['embeddingModel']}: {rates}; search p50 / p95 "
        f"{search['alone']['p50ms']} / {search['alone']['p95ms']} ms alone, {search['duringWrites']['p50ms']} / "
        f"{search['duringWrites']['p95ms']} ms while writes run"
    )


def update_readme(readme: Path) -> None:
    """Replace the blocks between the markers in the project README with the current figures."""
    refresh(
        readme,
        {
            "quality": "\n" + compact_summary(DEFAULT_MODEL),
            "image": image_sentence(),
            "torchfree": torch_free_sentence(),
            "documents": documents_sentence(),
        },
    )


def plot_quality(model: str, target: Path) -> None:
    """nDCG@10 per system, one group of bars per dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reports = quality_reports(model)
    if not reports:
        return
    systems = list(dict.fromkeys(s for r in reports for s in r["results"]))
    width = 0.8 / len(systems)
    fig, ax = plt.subplots(figsize=(10, 4))
    for i, system in enumerate(systems):
        xs = [d + i * width for d in range(len(reports))]
        ys = [r["results"].get(system, {}).get("metrics", {}).get("ndcg@10", 0.0) for r in reports]
        ax.bar(xs, ys, width, label=system)
    ax.set_xticks([d + 0.4 - width / 2 for d in range(len(reports))])
    ax.set_xticklabels([f"{r['dataset']} ({r['split']})" for r in reports])
    ax.set_ylabel("nDCG@10")
    ax.set_ylim(0, 1)
    ax.set_title(f"Retrieval quality per system — {model}")
    ax.legend(fontsize=8, ncol=4, loc="lower right")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    plt.close(fig)


def summary_block(model: str = DEFAULT_MODEL) -> str:
    """The `summary` block: every quality run's table, then the plots."""
    parts = ["\n\n", summary().strip(), "\n\n", f"![quality](results/quality-{model}.png)\n\n"]
    parts += [f"![latency](results/{p.name})\n\n" for p in sorted(RESULTS.glob("latency-*.png"))]
    parts += [f"![scale](results/{p.name})\n\n" for p in sorted(RESULTS.glob("scale-*.png"))]
    return "".join(parts)


def tables_block() -> str:
    """The `tables` block: the before/after comparisons, then every result table (`results/*.md`)."""
    parts = ["\n\n"]
    for section in (graph_before_after(), build_encoder_comparison()):
        if section:
            parts.append(section.strip() + "\n\n")
    parts += [md.read_text("utf-8").strip() + "\n\n" for md in sorted(RESULTS.glob("*.md"))]
    return "".join(parts)


def update_benchmarks_pages(readme: Path, tables: Path, model: str = DEFAULT_MODEL) -> None:
    """Replace the generated blocks of benchmarks/README.md (`summary`) and docs/tables.md (`tables`)."""
    refresh(readme, {"summary": summary_block(model)})
    refresh(tables, {"tables": tables_block()})


def main() -> None:
    here = Path(__file__).parent
    plot_quality(DEFAULT_MODEL, RESULTS / f"quality-{DEFAULT_MODEL}.png")
    update_benchmarks_pages(here / "README.md", here / "docs" / "tables.md")
    update_readme(here.resolve().parent / "README.md")


if __name__ == "__main__":
    main()
