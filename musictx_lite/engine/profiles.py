"""Profiles and devices: how big a run is, and where it runs.

Notebook: every chapter's first cell (``chapter.setup()``); explained in book/using.md.

``smoke`` is for CI (seconds per chapter), ``cpu`` trains each chapter in at most
3 minutes on 2 cores, ``gpu`` is a bigger model for Colab. The profile is picked
automatically (``gpu`` with CUDA, else ``cpu``); ``MUSICTX_PROFILE`` overrides it.
A profile holds one default model size and training budget, and per size class
(``SIZES``; each model's record in ``models.MODELS`` names its class) the settings
that differ: a transformer wants a narrower, deeper model than an LSTM. Every
class has an entry in every profile (an empty one takes the defaults); a setting
that is neither a ModelConfig nor a TrainConfig field is an error, so a typo
never passes silently.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import torch

from .. import settings
from ..models.config import ModelConfig
from ..models.registry import MODELS
from .training import TrainConfig

MODEL_KEYS = {f.name for f in fields(ModelConfig)}
TRAIN_KEYS = {f.name for f in fields(TrainConfig)}


@dataclass(frozen=True)
class Profile:
    """A model size and a training budget, shared by every chapter."""

    name: str
    model: dict                        # ModelConfig fields, without vocab_size
    train: TrainConfig
    sample_steps: int = 64             # 16th steps of music to generate
    notes: str = ""
    sizes: dict = field(default_factory=dict)       # per size class: ModelConfig / TrainConfig fields
    comparison: dict = field(default_factory=dict)  # chapter 11: ModelConfig / TrainConfig fields for every model
    comparison_sizes: dict = field(default_factory=dict)   # per size class, on top of ``comparison``
    # why the chapters do not assert the readings that rest on training in this profile ("": they do;
    # ``classroom.chapter.claim``): the profile's runs were not measured to bear them out, or mean nothing
    unchecked: str = ""

    def __post_init__(self) -> None:
        if set(self.model) - MODEL_KEYS:
            raise ValueError(f"profile {self.name}: unknown model settings {sorted(set(self.model) - MODEL_KEYS)}; "
                             f"ModelConfig has {sorted(MODEL_KEYS)}")
        for size, over in {**self.sizes, "comparison (chapter 11)": self.comparison,
                           **{f"{k} (comparison)": v for k, v in self.comparison_sizes.items()}}.items():
            unknown = set(over) - MODEL_KEYS - TRAIN_KEYS
            if unknown:
                raise ValueError(f"profile {self.name}, size {size!r}: unknown settings {sorted(unknown)}; "
                                 f"ModelConfig has {sorted(MODEL_KEYS)}, TrainConfig has {sorted(TRAIN_KEYS)}")
        unknown = set(self.sizes) - set(SIZES)
        if unknown:
            raise ValueError(f"profile {self.name}: unknown size classes {sorted(unknown)}; choose from {SIZES}")

    def model_config(self, name: str, **kw) -> ModelConfig:
        """The ModelConfig of model ``name`` in a chapter of this profile; ``kw`` changes fields (``resolve``)."""
        return resolve(name, self, "chapter", **kw)[0]

    def train_config(self, name: str, **kw) -> TrainConfig:
        """The TrainConfig of model ``name`` in a chapter of this profile; ``kw`` changes fields (``resolve``)."""
        return resolve(name, self, "chapter", **kw)[1]


# The size classes a model's record can name. "decoder" is every decoder of chapters 6-11: they share
# chapter 5's shape in each profile, and only positions and the mixer change.
SIZES = ("lstm", "fill", "one-head", "multi-head", "transformer", "decoder", "harmoniser", "piano")
# Chapter 12's encoder-decoder starts from the shipped ``relative`` decoder (``Harmoniser.start_from``), so in
# every profile it has that decoder's shape (the recipe's); the profiles set its budget.
SHIPPED_SHAPE = dict(n_embd=128, n_layers=4, n_heads=4, context=256, dropout=0.1)

# Chapter 13's piano decoders see 2,048 events, the paper's length. On 2 CPU cores (the cpu profile) a
# narrow two-block decoder, 45 steps of 4 crops: global and local attention, two seeds each, train in the
# chapter's 3 minutes (60 steps took 190 s in the sixth recorded build, 50 steps 178 s). The shipped model
# (``paper``) is chapter 8's recipe shape over 2,048 events, trained for an hour on one core; Colab's
# (``gpu``) is wider, on MAESTRO, two seeds of each within the 30 T4-minutes of the whole book
# (``budget --profile gpu``).
PIANO_CPU = dict(n_embd=64, n_layers=2, n_heads=4, context=2048, dropout=0.0, batch_size=4, max_steps=45,
                 warmup_steps=10, lr=3e-3, eval_every=45, ckpt_every=45, transpose=True)
PIANO_RECIPE = dict(n_embd=128, n_layers=4, n_heads=4, context=2048, dropout=0.1, batch_size=4, max_steps=1000,
                    lr=2e-3, min_lr_ratio=0.1, warmup_steps=100, weight_decay=0.1, eval_every=100, ckpt_every=50,
                    transpose=True, keep_best=True, patience=None, cpu_bf16=False)
PIANO_GPU = dict(n_embd=192, n_layers=4, n_heads=4, context=2048, dropout=0.1, batch_size=8, max_steps=1500,
                 lr=1e-3, min_lr_ratio=0.1, warmup_steps=150, weight_decay=0.1, eval_every=500, ckpt_every=250,
                 transpose=True, eval_pieces=20)

PROFILES = {
    "smoke": Profile(
        "smoke",
        model=dict(n_embd=32, n_layers=1, n_heads=2, context=128, dropout=0.0),
        train=TrainConfig(batch_size=8, max_steps=20, lr=3e-3, warmup_steps=4, eval_every=10,
                          ckpt_every=10, eval_pieces=8),
        sample_steps=16,
        notes="CI: seconds per chapter; numbers mean nothing",
        unchecked="the smoke profile trains for seconds: its numbers mean nothing",
        sizes={**{size: {} for size in SIZES}, "fill": dict(batch_size=64),
               "harmoniser": dict(SHIPPED_SHAPE, batch_size=4, max_steps=4, eval_every=4, ckpt_every=4),
               "piano": dict(context=512, batch_size=2, max_steps=4, eval_every=4, ckpt_every=4, eval_pieces=2)},
        comparison=dict(eval_every=5),
    ),
    "cpu": Profile(
        "cpu",
        model=dict(n_embd=192, n_layers=1, n_heads=4, context=128, dropout=0.0),
        train=TrainConfig(batch_size=32, max_steps=500, lr=4e-3, warmup_steps=50, eval_every=125,
                          ckpt_every=125),
        notes="2 CPU cores: each chapter trains in at most 3 minutes",
        sizes={
            "lstm": {},
            "fill": dict(n_embd=64, batch_size=256, max_steps=3000, eval_every=750, ckpt_every=750),
            "one-head": dict(n_embd=128),
            "multi-head": dict(n_embd=128, n_heads=4),
            "transformer": dict(n_embd=64, n_layers=3, n_heads=4),
            # chapter 5's decoder: 400 steps, so that three of them train in a chapter's 3 minutes, at a
            # higher rate for the short run
            "decoder": dict(n_embd=64, n_layers=3, n_heads=4, max_steps=400, eval_every=100, ckpt_every=100,
                            lr=6e-3),
            # chapter 12's encoder-decoder, the shipped decoder's shape, its encoder and cross-attention
            # trained over the frozen decoder: about 90 s of the chapter's 3 minutes
            "harmoniser": dict(SHIPPED_SHAPE, batch_size=16, max_steps=200, warmup_steps=20, lr=3e-3,
                               eval_every=100, ckpt_every=100, eval_pieces=16, transpose=True, cpu_bf16=True),
            # chapter 13: 2,048 events, a small decoder, global and local for two seeds each in 3 minutes
            "piano": PIANO_CPU,
        },
        # chapter 11 trains 17 models within its 3 minutes: chapters 6-9's size for 120 steps
        comparison=dict(n_embd=64, n_layers=3, n_heads=4, max_steps=120, warmup_steps=20, lr=6e-3,
                        eval_every=30, ckpt_every=120),
    ),
}


# The paper-level recipe (chapter 11, ``reproduce jsb --profile paper``): what a careful practitioner does with
# 229 chorales. Chapter 11 explains each ingredient; ``reproduce ablation`` measures what some of them buy.
RECIPE = dict(n_embd=128, n_layers=4, n_heads=4, context=256, dropout=0.1,
              batch_size=16, max_steps=12000, lr=3e-3, min_lr_ratio=0.1, warmup_steps=200, weight_decay=0.1,
              eval_every=500, ckpt_every=250, transpose=True, keep_best=True, patience=6, cpu_bf16=True)
# the LSTMs of a fair comparison: two layers of 256 units (chapter 1's were one layer)
RECIPE_LSTM = dict(n_embd=256, n_layers=2, dropout=0.3)
PROFILES["paper"] = Profile(
    "paper",
    model={k: v for k, v in RECIPE.items() if k in MODEL_KEYS},
    train=TrainConfig(**{k: v for k, v in RECIPE.items() if k in TRAIN_KEYS}),
    sample_steps=64,
    notes="the paper-level recipe of chapter 11 (reproduce jsb, compare): hours on a CPU, minutes on a GPU",
    unchecked="the chapters were not written for the paper profile",
    sizes={**{size: {} for size in SIZES}, "fill": dict(transpose=False), "lstm": RECIPE_LSTM,
           "harmoniser": SHIPPED_SHAPE, "piano": PIANO_RECIPE},
    comparison={},                       # compare --profile paper: every model with the whole recipe
    comparison_sizes={"lstm": RECIPE_LSTM},
)
# Colab's profile is the recipe at a budget the whole book trains in within 30 T4-minutes (estimated by
# ``python -m musictx_lite budget --profile gpu``; per chapter: ``classroom.chapter.CHAPTER_RUNS``): the
# recipe's model (width 128, 4 blocks, 4 heads, context 256), its transposition, dropout and weight decay of
# 0.1, AdamW with warm-up and a cosine decay to 10 %, for 2,000 steps a decoder and 800 for each of chapter
# 11's 17 models. No early stopping: at these budgets the recipe's runs are still at their best at their
# last evaluation (chapter 11's ledger at 3,000 steps: 11 of its first 12 runs), so keeping the best weights
# would keep the last, and every chapter reads the run it trained to the end. The models whose chapters
# teach one layer keep it (chapters 1-4), and chapter 5's stacks keep the cpu profile's shape, whose
# gradients at initialisation the chapter reads. bf16 autocast from Ampere on, fp16 with a gradient scaler on
# a T4 (``precision.precision``).
GPU_STEPS = 2000
PROFILES["gpu"] = Profile(
    "gpu",
    model={k: v for k, v in RECIPE.items() if k in MODEL_KEYS},
    train=TrainConfig(**{**{k: v for k, v in RECIPE.items() if k in TRAIN_KEYS}, "cpu_bf16": False,
                         "keep_best": False, "patience": None,
                         "max_steps": GPU_STEPS, "eval_every": 250, "ckpt_every": 250}),
    sample_steps=64,
    notes="Colab: the recipe of chapter 11 at a short budget; the whole book trains in at most "
          "30 T4-minutes (estimated: python -m musictx_lite budget --profile gpu)",
    sizes={**{size: {} for size in SIZES},
           "lstm": dict(n_embd=256, n_layers=1, dropout=0.3),      # the comparison's LSTM width, one layer
           # chapter 2's fill model sees one time step (4 tokens) at a time: a wide batch, no dropout at
           # this size, and no transposition (it is not a next-token model)
           "fill": dict(n_embd=128, n_layers=1, batch_size=512, max_steps=3000, lr=2e-3, dropout=0.0,
                        transpose=False, weight_decay=0.01, eval_every=500, ckpt_every=500),
           # chapters 3 and 4 come before dropout (chapter 5)
           "one-head": dict(n_layers=1, dropout=0.0),
           "multi-head": dict(n_layers=1, dropout=0.0),
           "transformer": dict(n_embd=64, n_layers=3, n_heads=4),
           "harmoniser": dict(SHIPPED_SHAPE, max_steps=800, eval_every=200, ckpt_every=200),
           "piano": PIANO_GPU},
    comparison=dict(max_steps=800, warmup_steps=100, eval_every=200, ckpt_every=200),
    unchecked="the gpu profile's chapters have not yet all run on a GPU, so what they read is printed, "
              "not asserted",
)


# the size classes that stay one layer deep in the comparison, as chapters 1, 3 and 4 built them: the LSTMs,
# and the attention layers with no residual block around them (stacked without residuals they were never
# meant to be)
ONE_LAYER_SIZES = ("lstm", "one-head", "multi-head")
# An ablation (``study.reproduce.ablation``, chapter 11): the paper profile's recipe at a small budget.
ABLATION_BUDGET = dict(max_steps=1500, warmup_steps=100, eval_every=250, ckpt_every=250, patience=None)
PURPOSES = ("chapter", "comparison", "ablation")


def resolve(name: str, profile: Profile | str | None = None, purpose: str = "chapter",
            **changes) -> tuple[ModelConfig, TrainConfig]:
    """The ModelConfig and TrainConfig of model ``name`` in ``profile`` for ``purpose``: the one place where
    a run's settings are put together. Each layer below overrides the one before; ``changes`` (fields of
    either config: ``seed=1``, ``context=512``) override all.

    - ``"chapter"``: the profile's ``model`` and ``train``, then the settings of the model's size class
      (``Profile.sizes``);
    - ``"comparison"`` (chapter 11's table; with the paper profile, the recipe): the profile's ``model`` and
      ``train``, then its ``comparison`` settings, the same for every model; the classes of
      ``ONE_LAYER_SIZES`` stay one layer deep, unless the class's ``comparison_sizes`` say otherwise;
    - ``"ablation"``: the paper profile's chapter settings (the recipe) at ``ABLATION_BUDGET``, whatever
      ``profile`` says.
    """
    if purpose not in PURPOSES:
        raise ValueError(f"unknown purpose {purpose!r}; choose one of {PURPOSES}")
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    if purpose == "ablation":
        profile = "paper"
    p = profile if isinstance(profile, Profile) else get_profile(profile)
    size = MODELS[name].size
    layers = [p.model, asdict(p.train)]
    if purpose == "comparison":
        if MODELS[name].left_out is not None:
            raise ValueError(f"{name!r} is not compared: {MODELS[name].left_out}")
        layers += [p.comparison, {"n_layers": 1} if size in ONE_LAYER_SIZES else {},
                   p.comparison_sizes.get(size, {})]
    else:
        if size not in p.sizes:
            raise ValueError(f"profile {p.name} has no entry for size class {size!r} (model {name!r}); "
                             f"it sizes {sorted(p.sizes)}")
        layers += [p.sizes[size], ABLATION_BUDGET if purpose == "ablation" else {}]
    unknown = set(changes) - MODEL_KEYS - TRAIN_KEYS
    if unknown:
        raise ValueError(f"unknown settings {sorted(unknown)}; ModelConfig has {sorted(MODEL_KEYS)}, "
                         f"TrainConfig has {sorted(TRAIN_KEYS)}")
    merged = {k: v for layer in layers + [changes] for k, v in layer.items()}
    return (ModelConfig(**{k: v for k, v in merged.items() if k in MODEL_KEYS}),
            TrainConfig(**{k: v for k, v in merged.items() if k in TRAIN_KEYS}))


def get_profile(name: str | None = None) -> Profile:
    """The named profile, else ``MUSICTX_PROFILE``, else gpu with CUDA and cpu without."""
    name = name or settings.profile() or ("gpu" if torch.cuda.is_available() else "cpu")
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}")
    return PROFILES[name]


# The effective speed assumed for a Colab T4 on the book's small models: 1/8 of its 65 TFLOP/s fp16
# tensor-core peak (small matrices and kernel launches keep it far from the peak).
T4_FLOPS = 8e12


def _measured_step_s() -> float:
    """The fixed cost of a training step that a T4 pays too (kernel launches, the optimiser, Python): the
    fastest step of the recipe measured on a large GPU, whose arithmetic is a small part of it
    (``pretrained/recipe-timing.json``, made by ``scripts.time_recipe``); 10 ms where that file is absent."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "pretrained" / "recipe-timing.json"
    try:
        return min(r["s_per_step"] for r in json.loads(path.read_text())["rows"])
    except (OSError, ValueError, KeyError):
        return 0.01


T4_STEP_S = _measured_step_s()


def config_flops(name: str, mcfg: ModelConfig, tcfg: TrainConfig) -> float:
    """Estimated FLOPs to train model ``name`` of config ``mcfg`` for ``tcfg``: 6 per weight per target token
    (2 forward, 4 backward), plus 12 S C per token for each attention layer's scores and weighted sums, S
    the keys a query sees: the context T, or 2N for local attention in blocks of N (chapter 9)."""
    from ..models.attention import Head, MultiHeadAttention
    from ..models.local import LocalAttention
    from ..models.registry import build_model
    from ..models.rnn import LSTMAttention

    with torch.device("meta"):                                   # sizes only: no memory, no time
        model = build_model(name, mcfg)
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    weights += sum(p.numel() for n, p in model.named_parameters() if "lstm" in n)
    T = getattr(model, "context", None) or mcfg.context
    # each attention layer's span: the keys a query sees, T for global attention, at most 2N for local
    spans = [min(T, 2 * m.N) if isinstance(m, LocalAttention) else T for m in model.modules()
             if isinstance(m, (MultiHeadAttention, LSTMAttention)) or
             (isinstance(m, Head) and not isinstance(model, LSTMAttention))]
    tokens = tcfg.batch_size * T * tcfg.max_steps
    return tokens * (6 * weights + 12 * sum(spans) * mcfg.n_embd)


def train_flops(name: str, profile: Profile | str) -> float:
    """Estimated FLOPs to train model ``name`` in ``profile`` (``config_flops``)."""
    p = get_profile(profile) if isinstance(profile, str) else profile
    return config_flops(name, p.model_config(name), p.train_config(name))


def config_t4_minutes(name: str, mcfg: ModelConfig, tcfg: TrainConfig) -> float:
    """Estimated minutes to train ``name`` of config ``mcfg`` for ``tcfg`` on a T4:
    ``config_flops / T4_FLOPS + steps * T4_STEP_S``. An estimate, not a measurement."""
    return (config_flops(name, mcfg, tcfg) / T4_FLOPS + tcfg.max_steps * T4_STEP_S) / 60


def t4_minutes(name: str, profile: Profile | str = "gpu") -> float:
    """Estimated minutes to train ``name`` on a T4 in ``profile`` (``config_t4_minutes``)."""
    p = get_profile(profile) if isinstance(profile, str) else profile
    return config_t4_minutes(name, p.model_config(name), p.train_config(name))


def t4_minutes_from(name: str, s_per_step: float, profile: Profile | str = "gpu") -> float:
    """Estimated minutes to train ``name`` on a T4, from the seconds per step measured on a large GPU. A model
    this small leaves a large GPU idle: its step is the fixed cost (kernel launches, the optimiser, Python),
    which a T4 pays too. So the measured step takes the place of ``T4_STEP_S``, and the arithmetic is added at
    the T4's effective speed, ``train_flops / T4_FLOPS``. It errs long by the large GPU's own arithmetic,
    which its measured step includes, and short where the T4's host CPU is slower. An estimate, not a
    measurement."""
    p = get_profile(profile) if isinstance(profile, str) else profile
    return (train_flops(name, p) / T4_FLOPS + p.train_config(name).max_steps * s_per_step) / 60
