"""`delink train-redactor`, `delink redaction-privacy`: learned redaction and its ε."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import COMPANIONS, app


@app.command("train-redactor", rich_help_panel=COMPANIONS)
def train_redactor_command(
    sensitive: Path = typer.Option(..., "--sensitive", help="JSONL of the sensitive collection D0 (one text per line)."),
    safe: Path = typer.Option(..., "--safe", help="JSONL of the safe collection D1."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for the trained spaCy pipeline."),
    fraction: float = typer.Option(0.2, "--fraction", help="Share of each text's words to redact, in (0, 1]."),
    method: str = typer.Option("ranker", "--method", help="ranker (learned), logreg (largest |weight|) or logreg_d0 (weight towards D0)."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field holding the text."),
    base_model: Optional[str] = typer.Option(None, "--base-model", help="spaCy pipeline to extend (default: blank English)."),
    embedder: str = typer.Option("minilm", "--embedder", help="minilm, or spacy to use the base model's doc.tensor."),
    loss: str = typer.Option("gaussian", "--loss", help="Ranker loss: gaussian (default) or knn (the paper's kNN KL)."),
    epochs: int = typer.Option(30, "--epochs", help="Training epochs (the learning rate decays to 0 over them)."),
    batch_size: int = typer.Option(128, "--batch-size", help="Texts per side in each training batch."),
    seed: int = typer.Option(0, "--seed", help="Seed for the held-out split, batches and weights."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
) -> None:
    """Train the delink_redactor (Gusain & Leith 2025) and save it as a loadable spaCy pipeline."""
    from ..extras import require_extra

    require_extra("redaction", "delink train-redactor")
    import spacy

    from ..errors import InputError
    from ..io.files import atomic_directory, refuse_same_file
    from ..redaction import RankerSettings
    from ..redaction.component import LOGREG_METHODS, texts_from_jsonl, train_pipeline

    if method not in ("ranker", *LOGREG_METHODS):
        raise InputError(f"--method {method!r}: train ranker, logreg or logreg_d0 (random needs no training)")
    refuse_same_file([sensitive, safe], output)
    if output.exists() and not overwrite:
        raise InputError(f"{output} already exists; choose another --output or pass --overwrite")
    settings = RankerSettings(loss=loss, epochs=epochs, batch_size=batch_size, seed=seed)
    sensitive_texts = texts_from_jsonl(sensitive, text_field)
    safe_texts = texts_from_jsonl(safe, text_field)
    base = spacy.load(base_model) if base_model else None
    nlp = train_pipeline(sensitive_texts, safe_texts, method, fraction, settings, base, embedder, progress=True)
    with atomic_directory(output, overwrite=overwrite) as folder:
        nlp.to_disk(folder)
    training = nlp.get_pipe("delink_redactor").training  # type: ignore[attr-defined]
    if method == "ranker":
        history = training["history"]
        detail = (
            f"{training['steps']} steps, held-out {loss} divergence of the hard mask "
            f"{history[0]['valid_loss']:.4f} after epoch 1 -> {history[-1]['valid_loss']:.4f}, {training['seconds']:.1f} s"
        )
    else:
        detail = f"{training['vocabulary']:,} word weights"
    typer.echo(f"trained {method} on {len(sensitive_texts):,} + {len(safe_texts):,} texts ({detail}) -> {output}", err=True)


@app.command("redaction-privacy", rich_help_panel=COMPANIONS)
def redaction_privacy_command(
    sensitive: Path = typer.Option(..., "--sensitive", help="JSONL of the sensitive collection D0."),
    safe: Path = typer.Option(..., "--safe", help="JSONL of the safe collection D1."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for privacy.json and privacy.png."),
    method: list[str] = typer.Option(
        ["ranker", "logreg", "logreg_d0", "random"], "--method",
        help="ranker, logreg, logreg_d0 or random; repeat or comma-separate.",
    ),
    fractions: str = typer.Option("0.1,0.2,0.3,0.4,0.6,0.8", "--fractions", help="Redaction levels to compare."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field holding the text."),
    test_share: float = typer.Option(0.3, "--test-share", help="Share of each collection held out for measuring."),
    repeats: int = typer.Option(3, "--repeats", help="Random splits (each with its own training) to average over."),
    max_texts: Optional[int] = typer.Option(None, "--max-texts", help="Use at most this many texts per collection."),
    estimator: str = typer.Option("gaussian", "--estimator", help="gaussian (default), knn, or paper (Gusain & Leith's own)."),
    alpha: float = typer.Option(2.0, "--alpha", help="Rényi order (> 1)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="δ of (ε, δ); default 1/n, n = test texts."),
    knn_k: Optional[int] = typer.Option(None, "--k", help="Neighbours for the knn estimator (default √n)."),
    pca: Optional[int] = typer.Option(None, "--pca", help="Project sentence embeddings on this many PCA axes."),
    bootstrap: Optional[int] = typer.Option(None, "--bootstrap", help="Resamples for the knn (200) and paper (25) intervals."),
    epochs: int = typer.Option(30, "--epochs", help="Ranker training epochs per level."),
    seed: int = typer.Option(0, "--seed", help="Seed of the first split; split r uses seed + r."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
) -> None:
    """ε of redacted texts against redaction level per method (Figure 2 of Gusain & Leith), plus attack AUC."""
    import json

    from ..extras import require_extra

    require_extra("redaction", "delink redaction-privacy")

    import spacy

    from ..errors import InputError
    from ..io.files import atomic_directory, atomic_write, refuse_same_file
    from ..redaction import PrivacySettings, RankerSettings, plot_privacy_curve, privacy_curve
    from ..redaction.component import texts_from_jsonl
    from ..redaction.evaluation import parse_fractions, sample_texts

    methods = [name.strip() for entry in method for name in entry.split(",") if name.strip()]
    levels = parse_fractions(fractions)
    refuse_same_file([sensitive, safe], output)
    if output.exists() and not overwrite:
        raise InputError(f"{output} already exists; choose another --output or pass --overwrite")
    privacy_settings = PrivacySettings(
        alpha=alpha, delta=delta, estimator=estimator, knn_k=knn_k, pca_dim=pca, n_bootstrap=bootstrap, seed=seed
    )
    pair = tuple(sample_texts(texts_from_jsonl(path, text_field), max_texts, seed) for path in (sensitive, safe))
    rows = privacy_curve(
        spacy.blank("en"), pair, methods, levels, test_share, repeats,  # type: ignore[arg-type]
        RankerSettings(epochs=epochs, seed=seed), privacy_settings, progress=True,
    )
    report = {
        "sensitive": str(sensitive),
        "safe": str(safe),
        "texts": [len(pair[0]), len(pair[1])],
        "test_texts": [round(test_share * len(pair[0])), round(test_share * len(pair[1]))],
        "estimator": estimator,
        "repeats": repeats,
        "rows": rows,
    }
    with atomic_directory(output, overwrite=overwrite) as folder:
        with atomic_write(folder / "privacy.json") as handle:
            handle.write(json.dumps(report, indent=2) + "\n")
        with atomic_write(folder / "privacy.png", "wb") as handle:
            plot_privacy_curve(rows, handle, title=f"{sensitive.parent.name or sensitive.stem}: ε vs redaction")
    for row in rows:
        typer.echo(
            f"{row['method']:<9} {row['fraction']:.2f}  ε {row['epsilon']:.3f} ± {row['epsilon_sd']:.3f} "
            f"(upper {row['epsilon_high']:.3f})  D {row['divergence']:.4f}  AUC {row['attack_auc']:.3f}"
        )
    typer.echo(f"-> {output / 'privacy.json'}, {output / 'privacy.png'}", err=True)
