"""Attention over images: patches, region encoders, a captioner, a small Vision Transformer, rollout.

* :func:`patchify` / :func:`unpatchify` cut an image into non-overlapping ``P x P`` patches
  (``torch.nn.functional.unfold``) and put them back (``fold``): the patch ``n`` is grid row
  ``n // g``, column ``n % g`` (row-major), its pixels channel-major, then row, then column.
* :class:`ConvEncoder` -- a small CNN whose strides end on a ``g x g`` grid of region feature
  vectors, one per ``image_size / g`` square of pixels; :class:`PatchEncoder` -- a linear embedding
  of each patch (the ViT's). Both add a learned vector per region, because a convolution (and a
  patch embedding) gives the same feature to the same content anywhere: without a position signal
  the attention could not tell "left" from "right".
* :class:`Captioner` -- Show, Attend and Tell (Xu et al. 2015, "Show, Attend and Tell: Neural Image
  Caption Generation with Visual Attention"): the region features are the memory of lesson 2's
  Bahdanau decoder, :class:`attnlab.models.rnn.Seq2SeqRNN` with ``source="states"``; with
  ``doubly_stochastic = lambda > 0`` training adds the paper's ``lambda * sum_i (1 - sum_t alpha_ti)^2``,
  and ``beta_gate=True`` makes the decoder a :class:`GatedStatesDecoder` -- the same class plus the
  paper's gating scalar ``beta_t = sigmoid(f_beta(s_{t-1}))`` on the context (its only addition).
  :func:`caption_nll` is the paper's NLL, summed over each caption and averaged over the images.
* :class:`ViT` -- Dosovitskiy et al. (2021), "An Image is Worth 16x16 Words: Transformers for Image
  Recognition at Scale": patches -> linear embedding + class token + learned positions -> lesson
  6's pre-LN encoder layers (:class:`attnlab.models.transformer.Encoder`) -> LayerNorm -> a linear head on
  the class token. :func:`attention_rollout` (Abnar & Zuidema 2020, "Quantifying Attention Flow in
  Transformers") follows the attention through the layers.
* :class:`CNNClassifier` -- the CNN baseline for the same classification tasks (mean of the regions,
  then a linear head).

Every model takes a frozen dataclass config and images ``(B, C, H, W)``, floats (the scenes have
pixels in ``[0, 1]``). The captioner speaks the decoding protocol of :mod:`attnlab.models.decoding`
(``encode(images)``, ``init_state``, ``step``, ``check_source``), so ``greedy_decode(captioner,
images)`` captions a batch.

Shape legend
------------
B  batch size
C  image channels
H, W  image height and width in pixels (``image_size`` each)
P  patch side in pixels
g  regions (patches) per side of the grid
N  number of patches, ``g * g``
S  number of regions the captioner attends over (``N``)
D  width of a region feature (the captioner's decoder state size ``hid_dim``)
E  ViT width ``d_model``
h  attention heads
L  ViT sequence length, ``N + 1`` (class token first)
T  caption length (``<bos>`` + words for inputs)
V  caption vocabulary size
K  number of classes
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.core.checks import (
    check_choice,
    check_float,
    check_float_tensor,
    check_positive_int,
    check_probability,
    check_tensor,
)
from attnlab.data.vocab import PAD
from attnlab.models.rnn import RNNConfig, Seq2SeqRNN, StatesEncoderDecoder, states_decoder_config
from attnlab.models.transformer import Encoder

__all__ = [
    "patchify",
    "unpatchify",
    "ConvEncoder",
    "PatchEncoder",
    "doubly_stochastic_loss",
    "caption_nll",
    "uniform_columns_floor",
    "GatedStatesDecoder",
    "CaptionerConfig",
    "Captioner",
    "ViTConfig",
    "ViT",
    "attention_rollout",
    "CNNConfig",
    "CNNClassifier",
]

ENCODERS = ("conv", "patch")
_POSITION_STD = 0.02  # initial scale of the learned position vectors (as in ViT)


# ----------------------------------------------------------------------------------------------
# patches
# ----------------------------------------------------------------------------------------------


def _image_side(name: str, value) -> tuple[int, int]:
    """``value`` as ``(H, W)``: one positive int for a square image, or a pair."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{name} must be an int or a pair (H, W), got {value!r}")
        return check_positive_int(f"{name}[0]", value[0]), check_positive_int(f"{name}[1]", value[1])
    side = check_positive_int(name, value)
    return side, side


def _check_divisible(H: int, W: int, patch: int) -> None:
    if H % patch or W % patch:
        raise ValueError(f"image size {H}x{W} is not divisible by patch={patch}: the patches must tile the image")


def patchify(images: torch.Tensor, patch: int) -> torch.Tensor:
    """Cut images into non-overlapping square patches, flattened.

    Args:
        images: float ``(B, C, H, W)``.
        patch: side ``P`` of a patch in pixels; it must divide ``H`` and ``W``.

    Returns:
        ``(B, N, C * P * P)``: patch ``n`` is grid row ``n // (W / P)``, column ``n % (W / P)``; within a
        patch the values are ordered by channel, then pixel row, then pixel column.

    Raises:
        TypeError: ``images`` is not a float tensor, ``patch`` not an int.
        ValueError: ``images`` is not 4-D, ``patch < 1``, or ``patch`` does not divide the image.
    """
    check_float_tensor("images", images, dims=4, shape_text="(B, C, H, W)")
    patch = check_positive_int("patch", patch)
    _check_divisible(images.shape[2], images.shape[3], patch)
    cols = F.unfold(images, kernel_size=patch, stride=patch)  # (B, C*P*P, N)
    return cols.transpose(1, 2)  # (B, N, C*P*P)


def unpatchify(patches: torch.Tensor, patch: int, image_size: int | tuple[int, int]) -> torch.Tensor:
    """The inverse of :func:`patchify`: put the patches back into images.

    Args:
        patches: float ``(B, N, C * P * P)`` as :func:`patchify` returns them.
        patch: ``P``.
        image_size: ``H = W`` (an int) or ``(H, W)``.

    Returns:
        ``(B, C, H, W)`` images.

    Raises:
        TypeError: ``patches`` is not a float tensor.
        ValueError: ``patch`` does not divide the image, or ``patches`` has not ``N = (H/P)(W/P)``
            rows of ``C * P * P`` values.
    """
    check_float_tensor("patches", patches, dims=3, shape_text="(B, N, C*P*P)")
    patch = check_positive_int("patch", patch)
    H, W = _image_side("image_size", image_size)
    _check_divisible(H, W, patch)
    n = (H // patch) * (W // patch)
    if patches.shape[1] != n or patches.shape[2] % (patch * patch) or patches.shape[2] == 0:
        raise ValueError(
            f"patches must be (B, N={n}, C*{patch}*{patch}) for {H}x{W} images, got shape {tuple(patches.shape)}"
        )
    cols = patches.transpose(1, 2)  # (B, C*P*P, N)
    return F.fold(cols, output_size=(H, W), kernel_size=patch, stride=patch)  # (B, C, H, W)


def _check_images(images, module: nn.Module, channels: int, image_size: int) -> None:
    """``images`` must be float ``(B >= 1, channels, image_size, image_size)`` on ``module``'s device and dtype."""
    check_float_tensor("images", images, dims=4, shape_text="(B, C, H, W)")
    want = (channels, image_size, image_size)
    if tuple(images.shape[1:]) != want or images.shape[0] < 1:
        raise ValueError(f"images must be (B, C, H, W) = (B, {', '.join(map(str, want))}), got {tuple(images.shape)}")
    weight = next(module.parameters())
    if images.device != weight.device:
        raise ValueError(
            f"images is on {images.device} but the model is on {weight.device}; move one of them "
            f"(e.g. images.to(next(model.parameters()).device))"
        )
    if images.dtype != weight.dtype:
        raise TypeError(f"images has dtype {images.dtype} but the model's weights are {weight.dtype}")


def _positions(n: int, dim: int) -> nn.Parameter:
    """A learned vector per region (or token): ``(1, n, dim)``."""
    return nn.Parameter(torch.randn(1, n, dim) * _POSITION_STD)  # (1, n, dim)


# ----------------------------------------------------------------------------------------------
# region encoders
# ----------------------------------------------------------------------------------------------


class ConvEncoder(nn.Module):
    """A small CNN: images ``(B, C, H, W)`` -> a grid of region features ``(B, S = g*g, D)``.

    Stride-2 ``3 x 3`` convolutions (each with BatchNorm and ReLU) halve the image while the halved
    side still splits into whole grid cells, then one stride-1 convolution mixes neighbours; an
    average pool finishes on the ``g x g`` grid (exact: every region averages one ``H/g``-pixel
    square's worth of feature map), and a ``1 x 1`` convolution gives the width ``D``. For
    48-pixel images and ``g = 6``: 48 -> 24 -> 12 -> 6, three strided layers, no pooling.

    Args:
        in_ch: ``C``.
        width: channels of the hidden convolutions.
        grid: ``g``; it must divide ``image_size``.
        image_size: ``H = W``.
        out_dim: ``D`` (default ``width``).
        positions: add a learned vector per region (off for a classifier that pools them anyway).

    Region ``i`` is the square at grid row ``i // g``, column ``i % g``, like patch ``i`` of
    :func:`patchify` with ``P = image_size / g``.
    """

    def __init__(
        self,
        in_ch: int = 3,
        width: int = 32,
        grid: int = 6,
        *,
        image_size: int = 48,
        out_dim: int | None = None,
        positions: bool = True,
    ) -> None:
        super().__init__()
        in_ch, width = check_positive_int("in_ch", in_ch), check_positive_int("width", width)
        grid, image_size = check_positive_int("grid", grid), check_positive_int("image_size", image_size)
        out_dim = width if out_dim is None else check_positive_int("out_dim", out_dim)
        if image_size % grid:
            raise ValueError(f"grid={grid} must divide image_size={image_size} (each region is a whole square)")
        if not isinstance(positions, bool):
            raise TypeError(f"positions must be a bool, got {type(positions).__name__}")
        self.in_ch, self.grid, self.image_size = in_ch, grid, image_size
        layers, ch, side = [], in_ch, image_size
        while side % 2 == 0 and (side // 2) % grid == 0:
            layers += [nn.Conv2d(ch, width, 3, stride=2, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
            ch, side = width, side // 2
        layers += [nn.Conv2d(ch, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d(side // grid) if side > grid else nn.Identity()
        self.proj = nn.Conv2d(width, out_dim, 1)
        self.pos = _positions(grid * grid, out_dim) if positions else None

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """``images (B, C, H, W)`` -> region features ``(B, S, D)``."""
        _check_images(images, self, self.in_ch, self.image_size)
        fmap = self.proj(self.pool(self.features(images)))  # (B, D, g, g)
        regions = fmap.flatten(2).transpose(1, 2)  # (B, S, D)
        return regions if self.pos is None else regions + self.pos  # (B, S, D)


class PatchEncoder(nn.Module):
    """Patch embedding: images ``(B, C, H, W)`` -> ``(B, N, D)``, a linear map of each patch plus a
    learned vector per patch position (the input layer of a ViT).

    Args:
        in_ch: ``C``.
        patch: ``P``; it must divide ``image_size``.
        image_size: ``H = W``.
        dim: ``D``.
    """

    def __init__(self, in_ch: int = 3, patch: int = 8, image_size: int = 48, dim: int = 64) -> None:
        super().__init__()
        in_ch, patch = check_positive_int("in_ch", in_ch), check_positive_int("patch", patch)
        image_size, dim = check_positive_int("image_size", image_size), check_positive_int("dim", dim)
        _check_divisible(image_size, image_size, patch)
        self.in_ch, self.patch, self.image_size = in_ch, patch, image_size
        self.grid = image_size // patch
        self.embed = nn.Linear(in_ch * patch * patch, dim)
        self.pos = _positions(self.grid * self.grid, dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """``images (B, C, H, W)`` -> patch embeddings ``(B, N, D)``."""
        _check_images(images, self, self.in_ch, self.image_size)
        return self.embed(patchify(images, self.patch)) + self.pos  # (B, N, D)


def _region_encoder(kind: str, channels: int, image_size: int, grid: int, width: int, dim: int) -> nn.Module:
    if kind == "conv":
        return ConvEncoder(channels, width, grid, image_size=image_size, out_dim=dim)
    return PatchEncoder(channels, image_size // grid, image_size, dim)


# ----------------------------------------------------------------------------------------------
# captioning
# ----------------------------------------------------------------------------------------------


def doubly_stochastic_loss(attn: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Xu et al.'s (2015) doubly stochastic penalty ``sum_i (1 - sum_t alpha_ti)^2``, averaged over the batch.

    Each row of the attention sums to 1 over the regions; the penalty asks that the columns, summed
    over the caption, come close to 1 too: every region looked at about once while the caption is
    written, so no region is ignored and none is stared at throughout.

    Args:
        attn: float ``(B, T, S)`` attention weights.
        keep: ``(B, T)`` bool, True at the real steps of each caption (its padding does not count).

    Returns:
        A scalar.

    Raises:
        TypeError, ValueError: wrong types or shapes.
    """
    check_float_tensor("attn", attn, dims=3, shape_text="(B, T, S)")
    check_tensor("keep", keep, dims=2, shape_text="(B, T)")
    if keep.dtype != torch.bool or keep.shape != attn.shape[:2]:
        raise ValueError(f"keep must be a bool (B, T) = {tuple(attn.shape[:2])}, got {keep.dtype} {tuple(keep.shape)}")
    total = (attn * keep.unsqueeze(-1).to(attn.dtype)).sum(1)  # (B, S) attention each region got
    return ((1.0 - total) ** 2).sum(1).mean()


def caption_nll(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Xu et al.'s (2015) caption loss: ``-sum_t log p(y_t)`` summed over each caption, averaged over the images.

    The course's translation loss averages over the tokens instead (and smooths the labels), which
    divides the NLL by the caption length: beside it a penalty of the same ``lambda`` weighs up to
    ``T`` times more.

    Args:
        logits: float ``(B, T, V)``.
        target: ``(B, T)`` token ids, ``PAD`` where nothing is scored.

    Returns:
        A scalar.
    """
    check_float_tensor("logits", logits, dims=3, shape_text="(B, T, V)")
    check_tensor("target", target, dims=2, shape_text="(B, T)")
    if target.shape != logits.shape[:2]:
        raise ValueError(f"target must be (B, T) = {tuple(logits.shape[:2])}, got {tuple(target.shape)}")
    nll = F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=PAD, reduction="sum")
    return nll / target.shape[0]


class CaptionNLL:
    """Picklable fastai loss object of :func:`caption_nll` (``Learner(loss_func=CaptionNLL())``)."""

    def __call__(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return caption_nll(logits, target)

    def __repr__(self) -> str:
        return "CaptionNLL()"


def uniform_columns_floor(lengths: torch.Tensor, regions: int) -> torch.Tensor:
    """The least doubly stochastic penalty a caption of ``T < S`` steps can reach: ``(S - T)^2 / S``.

    Every row of the attention sums to 1, so the ``S`` column sums add up to ``T``; the sum of
    ``(1 - c_i)^2`` under that constraint is smallest when every ``c_i = T / S`` (uniform columns),
    where it is ``S (1 - T/S)^2 = (S - T)^2 / S``. Only ``T <= S`` is accepted (the lesson's captions).

    Args:
        lengths: ``(N,)`` steps ``T`` per caption (words + ``<eos>``), each at most ``regions``.
        regions: ``S``.

    Returns:
        ``(N,)`` float floors.
    """
    check_positive_int("regions", regions)
    check_tensor("lengths", lengths, dims=1, shape_text="(N,)")
    if (lengths > regions).any() or (lengths < 0).any():
        raise ValueError(f"lengths must lie in [0, regions={regions}], got {lengths.min()}..{lengths.max()}")
    return (regions - lengths.double()) ** 2 / regions  # (N,)


class GatedStatesDecoder(Seq2SeqRNN):
    """:class:`attnlab.models.rnn.Seq2SeqRNN` with Xu et al.'s gating scalar on the attention context.

    ``z_t = beta_t sum_i alpha_ti a_i`` with ``beta_t = sigmoid(f_beta(s_{t-1}))``, a linear ``f_beta`` of the
    previous decoder state (the paper's h_{t-1}); Xu et al. report that it makes the attention weights
    put more emphasis on the objects. Everything else is the parent's; the last step's gates are kept
    in ``last_beta`` ``(B, 1)`` for inspection.
    """

    def __init__(self, config: RNNConfig):
        super().__init__(config)
        if config.attention != "bahdanau":
            raise ValueError(
                f"the gate reads the previous state: attention must be 'bahdanau', got {config.attention!r}"
            )
        self.f_beta = nn.Linear(config.hid_dim, 1)
        self.last_beta: torch.Tensor | None = None

    def _attend(self, query, memory, t, extras=()):
        context, attn, extras = super()._attend(query, memory, t, extras)  # (B, H), (B, S)
        beta = torch.sigmoid(self.f_beta(query))  # (B, 1)
        self.last_beta = beta.detach()
        return beta * context, attn, extras


@dataclass(frozen=True)
class CaptionerConfig:
    """Configuration of :class:`Captioner`.

    Attributes:
        tgt_vocab_size: ``V`` (caption vocabulary, specials included).
        image_size: ``H = W`` in pixels.
        channels: ``C``.
        encoder: ``"conv"`` (:class:`ConvEncoder`) or ``"patch"`` (:class:`PatchEncoder`).
        grid: ``g`` regions per side (``S = g * g``); it must divide ``image_size``; the patch
            encoder's patches have side ``image_size / g``.
        width: hidden channels of the CNN (unused by the patch encoder).
        emb_dim: word embedding size.
        hid_dim: decoder state size, also the width of the region features.
        attn_dim: hidden size of the Bahdanau (concat) score (default ``hid_dim``).
        dropout: dropout of the decoder (embeddings and outputs), in ``[0, 1)``.
        doubly_stochastic: weight ``lambda >= 0`` of :func:`doubly_stochastic_loss` (0 = off).
        beta_gate: Xu et al.'s gating scalar on the context (:class:`GatedStatesDecoder`).
    """

    tgt_vocab_size: int
    image_size: int = 48
    channels: int = 3
    encoder: str = "conv"
    grid: int = 6
    width: int = 32
    emb_dim: int = 32
    hid_dim: int = 96
    attn_dim: int | None = None
    dropout: float = 0.0
    doubly_stochastic: float = 0.0
    beta_gate: bool = False

    def __post_init__(self):
        check_choice("encoder", self.encoder, ENCODERS)
        if not isinstance(self.beta_gate, bool):
            raise TypeError(f"beta_gate must be a bool, got {type(self.beta_gate).__name__}")
        for name in ("image_size", "channels", "grid", "width"):
            check_positive_int(name, getattr(self, name))
        if self.image_size % self.grid:
            raise ValueError(f"grid={self.grid} must divide image_size={self.image_size} (each region is a square)")
        check_float("doubly_stochastic", self.doubly_stochastic)
        self.rnn_config()  # the decoder's own sizes are checked by RNNConfig

    def rnn_config(self) -> RNNConfig:
        """The :class:`attnlab.models.rnn.RNNConfig` of the decoder: Bahdanau attention over given states."""
        return states_decoder_config(self, max_src_len=self.grid * self.grid)


class Captioner(StatesEncoderDecoder):
    """Show, Attend and Tell: a region encoder and lesson 2's Bahdanau decoder attending over the regions.

    ``encoder`` is a :class:`ConvEncoder` or :class:`PatchEncoder` giving ``(B, S, D = hid_dim)``;
    ``decoder`` is a :class:`attnlab.models.rnn.Seq2SeqRNN` with ``source="states"`` (with ``beta_gate``, its
    subclass :class:`GatedStatesDecoder`, which adds only the gate), which starts from the
    mean region (see :meth:`~attnlab.models.rnn.Seq2SeqRNN.memory_from_states`). In training with
    ``doubly_stochastic > 0``, :meth:`forward` leaves ``lambda *`` :func:`doubly_stochastic_loss` in
    ``self.aux_loss`` for :class:`attnlab.training.train.AuxLoss` to add (else ``None``).
    """

    def __init__(self, config: CaptionerConfig):
        super().__init__()
        if not isinstance(config, CaptionerConfig):
            raise TypeError(f"config must be a CaptionerConfig, got {type(config).__name__}")
        self.config = c = config
        self.encoder = _region_encoder(c.encoder, c.channels, c.image_size, c.grid, c.width, c.hid_dim)
        self.decoder = (GatedStatesDecoder if c.beta_gate else Seq2SeqRNN)(c.rnn_config())
        self.aux_loss: torch.Tensor | None = None

    def check_source(self, images) -> None:
        """Raise unless ``images`` is float ``(B, C, H, W)`` of the configured size, device and dtype."""
        _check_images(images, self, self.config.channels, self.config.image_size)

    def encode_states(self, images: torch.Tensor) -> tuple[torch.Tensor, None]:
        """``images (B, C, H, W)`` -> the ``S`` region features ``(B, S, D)``, all of them real."""
        return self.encoder(images), None  # (B, S, D)

    def forward(
        self,
        images: torch.Tensor,
        tgt_in: torch.Tensor,
        *,
        teacher_forcing: float = 1.0,
        return_attention: bool = False,
    ):
        """Score captions of a batch of images.

        Args:
            images: float ``(B, C, H, W)``.
            tgt_in: ``(B, T)`` decoder inputs (``<bos>`` + words, right-padded with ``PAD``).
            teacher_forcing: as :meth:`attnlab.models.rnn.Seq2SeqRNN.decode`.
            return_attention: also return the attention over the regions.

        Returns:
            ``logits (B, T, V)``, or ``(logits, attn (B, T, S))`` with ``return_attention``.

        Raises:
            TypeError, ValueError: bad ``images`` (see :meth:`check_source`) or ``tgt_in`` /
                ``teacher_forcing`` (see :meth:`attnlab.models.rnn.Seq2SeqRNN.decode`).
        """
        lam = self.config.doubly_stochastic
        wants_aux = self.training and lam > 0
        self.aux_loss = None
        memory = self.encode(images)
        logits, attn = self.decoder.decode(
            memory, tgt_in, teacher_forcing=teacher_forcing, return_attention=True
        )  # (B, T, V), (B, T, S)
        if wants_aux:
            self.aux_loss = lam * doubly_stochastic_loss(attn, tgt_in != PAD)
        return (logits, attn) if return_attention else logits


# ----------------------------------------------------------------------------------------------
# Vision Transformer
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ViTConfig:
    """Configuration of :class:`ViT`.

    Attributes:
        num_classes: ``K``.
        image_size: ``H = W`` in pixels.
        channels: ``C``.
        patch: ``P``; it must divide ``image_size`` (``N = (image_size / P)^2`` patches).
        d_model: ``E``.
        num_heads: ``h`` (divides ``E``).
        num_layers: encoder layers.
        dim_feedforward: hidden width of each layer's feed-forward block.
        dropout: dropout after the embedding and inside the layers, in ``[0, 1)``.
    """

    num_classes: int
    image_size: int = 48
    channels: int = 3
    patch: int = 8
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    dim_feedforward: int = 128
    dropout: float = 0.0

    def __post_init__(self):
        for name in ("num_classes", "image_size", "channels", "patch", "d_model", "num_heads", "num_layers"):
            check_positive_int(name, getattr(self, name))
        check_positive_int("dim_feedforward", self.dim_feedforward)
        _check_divisible(self.image_size, self.image_size, self.patch)
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by num_heads={self.num_heads}")
        check_probability("dropout", self.dropout)


class ViT(nn.Module):
    """A small Vision Transformer classifier (see the module docstring).

    The class token is one learned vector prepended to the patch embeddings. The paper adds a
    position vector to it too; the sum of two learned vectors is one learned vector, so here the
    token carries its position itself and :class:`PatchEncoder` holds the patches' positions.
    """

    def __init__(self, config: ViTConfig):
        super().__init__()
        if not isinstance(config, ViTConfig):
            raise TypeError(f"config must be a ViTConfig, got {type(config).__name__}")
        self.config = c = config
        E = c.d_model
        self.patches = PatchEncoder(c.channels, c.patch, c.image_size, E)
        self.cls_token = _positions(1, E)  # (1, 1, E)
        self.drop = nn.Dropout(c.dropout)
        self.encoder = Encoder(
            c.num_layers, E, c.num_heads, c.dim_feedforward, c.dropout, norm_first=True, activation="gelu"
        )  # pre-LN: its final LayerNorm is the one before the head
        self.head = nn.Linear(E, c.num_classes)

    def forward(self, images: torch.Tensor, return_attention: bool = False):
        """Classify images.

        Args:
            images: float ``(B, C, H, W)``.
            return_attention: also return every layer's attention weights.

        Returns:
            ``logits (B, K)``, or ``(logits, [weights (B, h, L, L)] * num_layers)`` with
            ``return_attention`` (token 0 is the class token, token ``1 + n`` patch ``n``).

        Raises:
            TypeError, ValueError: images not float ``(B, C, H, W)`` of the configured size, device, dtype.
        """
        x = self.patches(images)  # (B, N, E)
        cls = self.cls_token.expand(x.size(0), -1, -1)  # (B, 1, E)
        x = self.drop(torch.cat([cls, x], dim=1))  # (B, L, E)
        x, maps = self.encoder(x, need_weights=bool(return_attention))  # (B, L, E), [(B, h, L, L)]
        logits = self.head(x[:, 0])  # (B, K)
        return (logits, maps) if return_attention else logits


def attention_rollout(attentions: list[torch.Tensor], residual: bool = True) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020): how much each token draws on each input token.

    Per layer the heads are averaged; with ``residual`` the identity is added (the residual
    connection passes every token on to itself) and the rows are renormalised, which is
    ``(A + I) / 2``. The layers' matrices are then multiplied from the first to the last:
    ``R = A_N ... A_2 A_1``. Row ``i`` of ``R`` is a distribution over the input tokens.

    Args:
        attentions: one float ``(B, h, L, L)`` per layer, in layer order (rows sum to 1).
        residual: account for the residual connections.

    Returns:
        ``(B, L, L)``; its rows sum to 1 (a row of zeros, a fully masked query without
        ``residual``, stays zero).

    Raises:
        TypeError: not a non-empty list of float tensors.
        ValueError: a tensor not ``(B, h, L, L)`` or of another shape than the first.
    """
    if not isinstance(attentions, (list, tuple)) or not attentions:
        raise TypeError(f"attentions must be a non-empty list of (B, h, L, L) tensors, got {type(attentions).__name__}")
    if not isinstance(residual, bool):
        raise TypeError(f"residual must be a bool, got {type(residual).__name__}")
    rollout = None
    for i, w in enumerate(attentions):
        check_float_tensor(f"attentions[{i}]", w, dims=4, shape_text="(B, h, L, L)")
        if w.shape[2] != w.shape[3] or w.shape != attentions[0].shape:
            raise ValueError(
                f"attentions[{i}] must be (B, h, L, L) like attentions[0] {tuple(attentions[0].shape)}, "
                f"got {tuple(w.shape)}"
            )
        a = w.mean(1)  # (B, L, L)
        if residual:
            a = a + torch.eye(a.size(-1), dtype=a.dtype, device=a.device)  # (B, L, L)
        a = a / a.sum(-1, keepdim=True).clamp_min(torch.finfo(a.dtype).tiny)  # (B, L, L) rows sum to 1
        rollout = a if rollout is None else a @ rollout  # (B, L, L)
    return rollout


# ----------------------------------------------------------------------------------------------
# CNN baseline
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CNNConfig:
    """Configuration of :class:`CNNClassifier`.

    Attributes:
        num_classes: ``K``.
        image_size: ``H = W`` in pixels.
        channels: ``C``.
        width: channels of the convolutions (and of the pooled feature).
        grid: ``g``: the CNN's last feature map is ``g x g`` (it must divide ``image_size``).
        dropout: dropout before the head, in ``[0, 1)``.
    """

    num_classes: int
    image_size: int = 48
    channels: int = 3
    width: int = 32
    grid: int = 6
    dropout: float = 0.0

    def __post_init__(self):
        for name in ("num_classes", "image_size", "channels", "width", "grid"):
            check_positive_int(name, getattr(self, name))
        if self.image_size % self.grid:
            raise ValueError(f"grid={self.grid} must divide image_size={self.image_size} (each region is a square)")
        check_probability("dropout", self.dropout)


class CNNClassifier(nn.Module):
    """The CNN baseline: :class:`ConvEncoder` (no positions), the mean of its regions, a linear head.

    ``forward(images) -> logits (B, K)``, the interface of :class:`ViT`.
    """

    def __init__(self, config: CNNConfig):
        super().__init__()
        if not isinstance(config, CNNConfig):
            raise TypeError(f"config must be a CNNConfig, got {type(config).__name__}")
        self.config = c = config
        self.encoder = ConvEncoder(c.channels, c.width, c.grid, image_size=c.image_size, positions=False)
        self.drop = nn.Dropout(c.dropout)
        self.head = nn.Linear(c.width, c.num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """``images (B, C, H, W)`` -> ``logits (B, K)``."""
        pooled = self.encoder(images).mean(1)  # (B, D)
        return self.head(self.drop(pooled))  # (B, K)
