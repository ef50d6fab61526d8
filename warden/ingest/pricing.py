"""Model prices and the gate metric, cost-weighted tokens (DESIGN.md §3).

Prices are USD per million tokens from the models' cards. Cache writes are priced from the
input price (5-minute TTL 1.25×, 1-hour TTL 2×), cache reads at 0.1×. Overrides come from
``[warden.pricing]`` in warden.toml, per model prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Iterable, Mapping, TypeVar

CACHE_WRITE_5M_FACTOR = 1.25
CACHE_WRITE_1H_FACTOR = 2.0
CACHE_READ_FACTOR = 0.1


@dataclass(frozen=True)
class ModelPrice:
    input: float  # $/MTok
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float

    @classmethod
    def from_card(cls, input_price: float, output_price: float) -> "ModelPrice":
        return cls(input_price, output_price, input_price * CACHE_WRITE_5M_FACTOR,
                   input_price * CACHE_WRITE_1H_FACTOR, input_price * CACHE_READ_FACTOR)


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one or more API responses."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    cache_read: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
                     self.cache_write_5m + other.cache_write_5m,
                     self.cache_write_1h + other.cache_write_1h, self.cache_read + other.cache_read)

    @property
    def cache_creation(self) -> int:
        return self.cache_write_5m + self.cache_write_1h

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_creation + self.cache_read


K = TypeVar("K", bound=Hashable)


def usage_by_key(counts: Iterable[tuple[K, int, int, int, int, int]]) -> dict[K, Usage]:
    """Per key, in the order keys first come, the sum of its (input, output, cache write 5m, 1h,
    cache read) counts: summed as ints (a Usage per addition cost more than reading a turn)."""
    return {key: Usage(*total) for key, total in counts_by_key(counts).items()}


def counts_by_key(counts: Iterable[tuple[K, int, int, int, int, int]]) -> dict[K, list[int]]:
    """:func:`usage_by_key`'s sums as lists of the five ints."""
    sums: dict[K, list[int]] = {}
    for key, input_tokens, output_tokens, write_5m, write_1h, read in counts:
        total = sums.get(key)
        if total is None:
            sums[key] = [input_tokens, output_tokens, write_5m, write_1h, read]
        else:
            total[0] += input_tokens
            total[1] += output_tokens
            total[2] += write_5m
            total[3] += write_1h
            total[4] += read
    return sums


# Longest matching prefix wins; dated ids ("claude-sonnet-4-20250514") match their family.
DEFAULT_PRICES: dict[str, ModelPrice] = {
    "claude-opus-4-7": ModelPrice.from_card(5.0, 25.0),  # not "claude-opus-4" (15/75): seen in the corpus
    "claude-opus-4-6": ModelPrice.from_card(5.0, 25.0),
    "claude-opus-4-5": ModelPrice.from_card(5.0, 25.0),
    "claude-opus-4-1": ModelPrice.from_card(15.0, 75.0),
    "claude-opus-4": ModelPrice.from_card(15.0, 75.0),
    "claude-sonnet-4-6": ModelPrice.from_card(3.0, 15.0),
    "claude-sonnet-4-5": ModelPrice.from_card(3.0, 15.0),
    "claude-sonnet-4": ModelPrice.from_card(3.0, 15.0),
    "claude-3-7-sonnet": ModelPrice.from_card(3.0, 15.0),
    "claude-3-5-sonnet": ModelPrice.from_card(3.0, 15.0),
    "claude-haiku-4-5": ModelPrice.from_card(1.0, 5.0),
    "claude-3-5-haiku": ModelPrice.from_card(0.8, 4.0),
    "claude-3-haiku": ModelPrice.from_card(0.25, 1.25),
    "claude-3-opus": ModelPrice.from_card(15.0, 75.0),
    # The simulated agent is priced like the Sonnet it stands in for.
    "sim-": ModelPrice.from_card(3.0, 15.0),
}
# Unknown models are priced as a Sonnet so the metric stays defined; they are flagged upstream.
FALLBACK_PRICE = DEFAULT_PRICES["claude-sonnet-4"]
# Synthetic placeholder messages Claude Code writes locally (no API call) cost nothing.
FREE_MODELS = {"<synthetic>"}
_PREFIX_MEMO_SIZE = 4096


class PriceTable:
    def __init__(self, overrides: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self._prices = dict(DEFAULT_PRICES)
        for prefix, values in (overrides or {}).items():
            base = self._prices.get(prefix, FALLBACK_PRICE)
            merged = {**base.__dict__, **{k: float(v) for k, v in values.items()}}
            if "input" in values:
                for key, factor in (("cache_write_5m", CACHE_WRITE_5M_FACTOR),
                                    ("cache_write_1h", CACHE_WRITE_1H_FACTOR),
                                    ("cache_read", CACHE_READ_FACTOR)):
                    if key not in values:
                        merged[key] = merged["input"] * factor
            self._prices[prefix] = ModelPrice(**merged)
        self._ordered = sorted(self._prices, key=len, reverse=True)
        # model -> its longest matching prefix (None: none): a collect prices each of thousands
        # of runs' few models three times, each a scan of the prefixes
        self._prefix_of: dict[str, str | None] = {}

    def _prefix(self, model: str) -> str | None:
        try:
            return self._prefix_of[model]
        except KeyError:
            found = next((p for p in self._ordered if model.startswith(p)), None)
            if len(self._prefix_of) < _PREFIX_MEMO_SIZE:  # bounded: model names come from transcripts
                self._prefix_of[model] = found
            return found

    def is_known(self, model: str) -> bool:
        return model in FREE_MODELS or self._prefix(model) is not None

    def price(self, model: str) -> ModelPrice:
        prefix = self._prefix(model)
        return FALLBACK_PRICE if prefix is None else self._prices[prefix]

    def cost_usd(self, model: str, usage: Usage) -> float:
        if model in FREE_MODELS:
            return 0.0
        p = self.price(model)
        return (usage.input_tokens * p.input + usage.output_tokens * p.output
                + usage.cache_write_5m * p.cache_write_5m + usage.cache_write_1h * p.cache_write_1h
                + usage.cache_read * p.cache_read) / 1_000_000

    def weighted_tokens(self, model: str, usage: Usage) -> float:
        """Cost-weighted tokens: the cost at the model's prices in equivalent input tokens."""
        if model in FREE_MODELS:
            return 0.0
        return self.cost_usd(model, usage) * 1_000_000 / self.price(model).input


DEFAULT_TABLE = PriceTable()
