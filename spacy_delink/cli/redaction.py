"""`delink train-redactor`, `delink redaction-privacy`: learned redaction and its ε."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import app


@app.command("train-redactor")
def train_redactor_command(
    sensitive: Path = typer.Option(..., "--sensitive", help="JSONL of the sensitive collection D0 (one text per line)."),
    safe: Path = typer.Option(..., "--safe", help="JSONL of the safe collection D1."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for the trained spaCy pipeline."),
    fraction: float = typer.Option(0.2, "--fraction", help="Share of each text's words to redact, in (0, 1]."),
    method: str = typer.Option("ranker", "--method", help="ranker (learned) or logreg (TF-IDF baseline)."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field holding the text."),
    base_model: Optional[str] = typer.Option(None, "--base-model", help="spaCy pipeline to extend (default: blank English)."),
    embedder: str = typer.Option("minilm", "--embedder", help="minilm, or spacy to use the base model's doc.tensor."),
    epochs: int = typer.Option(30, "--epochs", help="Most training epochs (early stopping may end sooner)."),
    patience: int = typer.Option(5, "--patience", help="Epochs without held-out improvement before stopping."),
    batch_size: int = typer.Option(128, "--batch-size", help="Texts per side in each training batch."),
    seed: int = typer.Option(0, "--seed", help="Seed for the held-out split, batches and weights."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
) -> None:
    """Train the delink_redactor (Gusain & Leith 2025) and save it as a loadable spaCy pipeline."""
    import spacy

    from ..errors import InputError
    from ..io import atomic_directory
    from ..redaction import RankerSettings
    from ..redaction.component import texts_from_jsonl, train_pipeline

    if method not in ("ranker", "logreg"):
        raise InputError(f"--method {method!r}: train ranker or logreg (random needs no training)")
    if output.exists() and not overwrite:
        raise InputError(f"{output} already exists; choose another --output or pass --overwrite")
    settings = RankerSettings(epochs=epochs, patience=patience, batch_size=batch_size, seed=seed)
    sensitive_texts = texts_from_jsonl(sensitive, text_field)
    safe_texts = texts_from_jsonl(safe, text_field)
    base = spacy.load(base_model) if base_model else None
    nlp = train_pipeline(sensitive_texts, safe_texts, method, fraction, settings, base, embedder, progress=True)
    with atomic_directory(output, overwrite=overwrite) as folder:
        nlp.to_disk(folder)
    training = nlp.get_pipe("delink_redactor").training  # type: ignore[attr-defined]
    detail = (
        f"best epoch {training['best_epoch']} of {len(training['history'])}, "
        f"held-out loss {training['history'][training['best_epoch'] - 1]['valid_loss']:.4f}, {training['seconds']:.1f} s"
        if method == "ranker"
        else f"{training['vocabulary']:,} word weights"
    )
    typer.echo(f"trained {method} on {len(sensitive_texts):,} + {len(safe_texts):,} texts ({detail}) -> {output}", err=True)


@app.command("redaction-privacy")
def redaction_privacy_command(
    sensitive: Path = typer.Option(..., "--sensitive", help="JSONL of the sensitive collection D0."),
    safe: Path = typer.Option(..., "--safe", help="JSONL of the safe collection D1."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for privacy.json and privacy.png."),
    method: list[str] = typer.Option(["ranker", "logreg", "random"], "--method", help="ranker, logreg or random; repeat or comma-separate."),
    fractions: str = typer.Option("0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8", "--fractions", help="Redaction levels to compare."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field holding the text."),
    test_share: float = typer.Option(0.3, "--test-share", help="Share of each collection held out for measuring."),
    max_texts: Optional[int] = typer.Option(None, "--max-texts", help="Use at most this many texts per collection."),
    alpha: float = typer.Option(2.0, "--alpha", help="Rényi order (> 1)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="δ of (ε, δ); default 1/n, n = test texts."),
    knn_k: Optional[int] = typer.Option(None, "--k", help="Neighbours for the divergence (default √n)."),
    pca: Optional[int] = typer.Option(None, "--pca", help="Project sentence embeddings on this many PCA axes."),
    bootstrap: int = typer.Option(200, "--bootstrap", help="Bootstrap resamples for the confidence bounds."),
    epochs: int = typer.Option(30, "--epochs", help="Most ranker training epochs per level."),
    seed: int = typer.Option(0, "--seed", help="Seed for splits, training and bootstrap."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
) -> None:
    """ε of redacted texts against redaction level per method (Figure 2 of Gusain & Leith), plus attack AUC."""
    import json

    import spacy

    from ..errors import InputError
    from ..io import atomic_directory, atomic_write
    from ..redaction import PrivacySettings, RankerSettings, plot_privacy_curve, privacy_curve
    from ..redaction.component import texts_from_jsonl
    from ..redaction.evaluation import parse_fractions, sample_texts, split_texts

    methods = [name.strip() for entry in method for name in entry.split(",") if name.strip()]
    levels = parse_fractions(fractions)
    if output.exists() and not overwrite:
        raise InputError(f"{output} already exists; choose another --output or pass --overwrite")
    privacy_settings = PrivacySettings(alpha=alpha, delta=delta, knn_k=knn_k, pca_dim=pca, n_bootstrap=bootstrap, seed=seed)
    pair = [sample_texts(texts_from_jsonl(path, text_field), max_texts, seed) for path in (sensitive, safe)]
    splits = [split_texts(texts, test_share, seed) for texts in pair]
    rows = privacy_curve(
        spacy.blank("en"),
        (splits[0][0], splits[1][0]),
        (splits[0][1], splits[1][1]),
        methods,
        levels,
        RankerSettings(epochs=epochs, seed=seed),
        privacy_settings,
        progress=True,
    )
    report = {
        "sensitive": str(sensitive),
        "safe": str(safe),
        "train_texts": [len(splits[0][0]), len(splits[1][0])],
        "test_texts": [len(splits[0][1]), len(splits[1][1])],
        "rows": rows,
    }
    with atomic_directory(output, overwrite=overwrite) as folder:
        with atomic_write(folder / "privacy.json") as handle:
            handle.write(json.dumps(report, indent=2) + "\n")
        with atomic_write(folder / "privacy.png", "wb") as handle:
            plot_privacy_curve(rows, handle, title=f"{sensitive.parent.name or sensitive.stem}: ε vs redaction")
    for row in rows:
        typer.echo(
            f"{row['method']:<7} {row['fraction']:.2f}  ε {row['epsilon']:.3f} "
            f"[{row['epsilon_low']:.3f}, {row['epsilon_high']:.3f}]  D {row['divergence']:.4f}  AUC {row['attack_auc']:.3f}"
        )
    typer.echo(f"-> {output / 'privacy.json'}, {output / 'privacy.png'}", err=True)
