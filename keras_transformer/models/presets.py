"""Named architectures for `Transformer.from_preset`."""

PRESETS = {
    # For tests, demos and the synthetic task: trains in minutes on a CPU.
    "tiny": dict(num_layers=2, d_model=128, num_heads=4, dff=512, dropout=0.1),
    "small": dict(num_layers=3, d_model=256, num_heads=4, dff=1024, dropout=0.1),
    # "Attention Is All You Need", Table 3.
    "base": dict(num_layers=6, d_model=512, num_heads=8, dff=2048, dropout=0.1),
    "big": dict(num_layers=6, d_model=1024, num_heads=16, dff=4096, dropout=0.3),
    # "Transformer-Tiny" of Wu et al. (ACL 2021), the strongest text-only
    # Transformer on Multi30k: one embedding for source, target and output,
    # so the run needs one joint vocabulary (TrainConfig.joint_vocabulary).
    # Dropout 0.3 on embeddings and residuals, none on attention weights
    # (fairseq's `--dropout 0.3` leaves `--attention-dropout` at 0).
    "transformer_tiny": dict(
        num_layers=4,
        d_model=128,
        num_heads=4,
        dff=256,
        dropout=0.3,
        attention_dropout=0.0,
        share_embeddings=True,
    ),
}


def preset_config(name):
    """Returns a copy of the architecture of preset `name`."""
    if name not in PRESETS:
        raise ValueError(
            f"Unknown preset {name!r}; available: {sorted(PRESETS)}. Received: name={name!r}"
        )
    return dict(PRESETS[name])
