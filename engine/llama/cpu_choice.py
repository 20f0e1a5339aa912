"""A CPU variant's probe and the choice among them (engine.llama.cpu), apart so that the
process's state (engine.llama.process_state) can name them without importing the chooser."""

from __future__ import annotations

from dataclasses import dataclass, field

NOT_PROBED = "not probed: a better-scored variant runs"
OUT_OF_TIME = "not probed: the probes' time limit had passed"


@dataclass(frozen=True, slots=True)
class Probe:
    """What one variant (or the one built-in build, named "") did here."""

    name: str
    score: int  # ggml's feature score; 0: this CPU lacks what it needs; -1: unknown
    runs: bool | None = None  # None: not probed, or the probe could not tell
    features: tuple[str, ...] = ()  # ggml's names, as llama_print_system_info reports them
    detail: str = ""  # one line: "passed", "died of SIGILL while decoding", …


@dataclass(frozen=True, slots=True)
class Choice:
    """The variant in use (None: none runs) and what each candidate did."""

    chosen: str | None
    how: str  # "probed", "forced by EMBER_CPU_VARIANT", …
    probes: tuple[Probe, ...] = field(default_factory=tuple)
    refused: str = ""  # why `chosen` cannot be used here (one line); "" when it can

    def probe(self, name: str | None) -> Probe | None:
        return next((p for p in self.probes if p.name == name), None)

    @property
    def skipped(self) -> list[Probe]:
        """Variants that were tried and failed (a trap, a probe that could not tell), and why."""
        return [
            p
            for p in self.probes
            if p.name != self.chosen
            and p.detail not in (NOT_PROBED, OUT_OF_TIME)
            and (p.runs is False or (p.score > 0 and p.runs is None))
        ]
