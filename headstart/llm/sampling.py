"""Next-token choice from logits: greedy, or temperature + top-p (nucleus) sampling with its own
seeded generator, so a seed reproduces a reply token for token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from headstart.config import LLMConfig

__all__ = ["Sampling", "Sampler"]


@dataclass(frozen=True, slots=True)
class Sampling:
    """Decoding settings. `temperature` 0 means greedy (argmax); `top_p` in (0, 1] keeps the smallest
    set of tokens whose probability reaches it (Holtzman et al. 2020, "The Curious Case of Neural Text
    Degeneration"); `seed` None draws a fresh seed."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if not self.temperature >= 0.0:  # also rejects NaN
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    @classmethod
    def from_config(cls, config: LLMConfig) -> Sampling:
        return cls(temperature=config.temperature, top_p=config.top_p, seed=config.seed)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


class Sampler:
    """Chooses tokens for one reply. Holds a `torch.Generator`, so two samplers made with the same
    seed choose the same tokens from the same logits."""

    def __init__(self, sampling: Sampling) -> None:
        import torch

        self.sampling = sampling
        self._generator = torch.Generator()
        if sampling.seed is None:
            self._generator.seed()
        else:
            self._generator.manual_seed(sampling.seed)

    def __call__(self, logits: torch.Tensor) -> int:
        """`logits`: float tensor of shape [vocab] for one position. Returns a token id."""
        import torch

        if logits.dim() != 1:
            raise ValueError(f"expected logits of shape [vocab], got {tuple(logits.shape)}")
        if self.sampling.greedy:
            return int(torch.argmax(logits))
        # On the CPU, where the generator lives: the same seed gives the same tokens on any device.
        probs = torch.softmax(logits.detach().float().cpu() / self.sampling.temperature, dim=-1)
        if self.sampling.top_p < 1.0:
            sorted_probs, sorted_ids = torch.sort(probs, descending=True)
            cumulative = torch.cumsum(sorted_probs, dim=-1)
            # Drop a token when the tokens before it already reach top_p (the first always stays).
            drop = cumulative - sorted_probs >= self.sampling.top_p
            sorted_probs = sorted_probs.masked_fill(drop, 0.0)
            choice = torch.multinomial(sorted_probs, 1, generator=self._generator)
            return int(sorted_ids[choice])
        return int(torch.multinomial(probs, 1, generator=self._generator))

    # -- pieces for speculative sampling (speculative.py) ------------------------------------------

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """The distribution this sampler draws from: float32 CPU tensor of shape [vocab] (after
        temperature and top-p; one-hot at the argmax when greedy)."""
        import torch

        if logits.dim() != 1:
            raise ValueError(f"expected logits of shape [vocab], got {tuple(logits.shape)}")
        logits = logits.detach().float().cpu()
        if self.sampling.greedy:
            out = torch.zeros_like(logits)
            out[int(torch.argmax(logits))] = 1.0
            return out
        probs = torch.softmax(logits / self.sampling.temperature, dim=-1)
        if self.sampling.top_p < 1.0:
            sorted_probs, sorted_ids = torch.sort(probs, descending=True)
            drop = torch.cumsum(sorted_probs, dim=-1) - sorted_probs >= self.sampling.top_p
            sorted_probs = sorted_probs.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter_(0, sorted_ids, sorted_probs)
            probs = probs / probs.sum()
        return probs

    def draw(self, probs: torch.Tensor) -> int:
        """A token id drawn from `probs` (shape [vocab], non-negative, not necessarily normalised)."""
        import torch

        return int(torch.multinomial(probs, 1, generator=self._generator))

    def uniform(self) -> float:
        """A uniform draw in [0, 1) from this sampler's generator."""
        import torch

        return float(torch.rand((), generator=self._generator))
