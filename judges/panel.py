"""Panel files: which judges sit on the panel, with what prompt, model and limits.

A panel file is YAML (the keys below are the user-facing contract)::

    name: claude-gpt-local
    quorum: 2
    judges:
      - {id: claude, provider: anthropic, model: claude-sonnet-4-5, prompt: data2txt_spans}
      - {id: numbers, provider: offline, detector: numbers}
      - {id: mine, provider: openai, model: gpt-4.1, prompt: ./my_prompt.txt, output: score}

``prompt`` is a catalogue name (``prompts/catalog.yaml``) or the path of a prompt file,
relative to the panel file's folder; a file prompt declares ``output`` (``score`` or
``spans``) and, for spans, ``span_variable`` when its spans do not point into ``response``.

A ``recorded`` judge is one whose answers were made elsewhere and imported with ``juryflow
import`` (:mod:`juryflow.analysis.recorded_import`): it has no prompt and no client, is never
called, and sits only in the panels stored with imported runs (a panel file that names one
is refused by :func:`load_panel`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from juryflow.judges.providers.price import Price
from juryflow.judges.providers.registry import NOT_PROVIDERS, registered_provider
from juryflow.judges.redact import header_secrets, redact_url, url_secrets
from juryflow.judges.untrusted.loading import NestingError, load_yaml
from juryflow.maths.consensus import default_quorum
from juryflow.maths.names import closest, did_you_mean

if TYPE_CHECKING:
    from juryflow.maths.reducers import ConsensusRule
    from juryflow.prompts.loader import PromptTemplate

UNCALLED_PROVIDERS = NOT_PROVIDERS
"""Providers with no API key and no model client: offline detectors, recorded judges."""

RECORDED_REFUSAL = (
    "provider 'recorded' names a judge whose answers were imported with `juryflow import`: "
    "juryflow cannot call it. To judge with it, give it a provider that calls a model "
    "(anthropic or openai, with model and prompt) or an offline detector; to analyse its "
    "imported answers, run `juryflow agreement RUN` on the imported run"
)

MAX_PANEL_BYTES = 1_000_000
"""Largest panel file read. A panel of fifty judges is a few kilobytes (prompts live in
files of their own, themselves at most a megabyte each); a bigger file is a mistake and is
refused before it is read."""

RESERVED_JUDGE_IDS = frozenset({"consensus", "gold"})
"""Judge ids the analysis views use for rows of their own (compared case-insensitively)."""


class PanelError(ValueError):
    """A panel file that cannot be used, with a message saying what to change."""


class JudgeSpec(BaseModel):
    """One judge of a panel. Serialisable, so tasks on remote workers can rebuild the judge."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    provider: str
    """``offline``, ``recorded`` or a registered provider
    (:mod:`juryflow.judges.providers.registry`: ``anthropic``, ``openai``, ...)."""
    model: str | None = None
    prompt: str | None = None
    detector: str | None = None
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=2048, gt=0)
    timeout: float = Field(default=60.0, gt=0)
    base_url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    api_key_env: str | None = None
    api_key_secret: str | None = None
    """Name of a Prefect Secret block holding the key, used when the variable is unset."""
    max_concurrency: int = Field(default=8, gt=0)
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    max_attempts: int = Field(default=5, ge=1, le=20)
    structured_output: bool = True
    """Use tool calling / JSON-schema output where the provider supports it."""
    fuzzy_threshold: float = Field(default=85.0, ge=0, le=100)
    verdict_threshold: float | None = Field(default=None, gt=0, le=1)
    """A score at or above this is this judge's 'hallucinated' verdict; default: the prompt's."""
    output: Literal["score", "spans", "preference"] | None = None
    """What a prompt file asks for (a catalogue prompt declares its own)."""
    span_variable: str | None = None
    """The variable a spans prompt file's spans point into; default ``response``."""
    prompt_text: str | None = None
    """A prompt file's text, read when the panel is loaded (``prompt`` then holds the file's
    absolute path). It travels with the spec, so remote tasks and resumed runs judge with
    the text the run started with; a panel file never sets it."""
    batch: bool | None = None
    """Send this judge's calls through its provider's batch API (at its batch prices);
    None: as the panel's ``batch`` says."""
    family: str | None = Field(default=None, min_length=1)
    """The model family the self-preference probe counts this judge in (``openai``,
    ``meta``, ...); default: read from ``model`` (:mod:`juryflow.judges.providers.families`)."""
    samples: int = Field(default=1, ge=1, le=100)
    """How many times the judge is asked per item (each sample its own call and cache key);
    its answer is ``sample_reducer`` over them. Default: the panel's ``samples``, else 1."""
    sample_reducer: str | None = None
    """How the samples become one answer (:mod:`juryflow.maths.samples.reducers`); default:
    ``median`` for a score judge, ``majority`` for a span judge."""

    @model_validator(mode="before")
    @classmethod
    def _read_prompt_file(cls, data: Any, info: ValidationInfo) -> Any:
        from juryflow.prompts.files import is_prompt_file, read_prompt_file
        from juryflow.prompts.loader import PromptError

        if not isinstance(data, dict) or data.get("prompt_text") is not None:
            return data
        prompt = data.get("prompt")
        if not isinstance(prompt, str) or not is_prompt_file(prompt):
            return data
        # Relative paths name files beside the panel file (parse_panel passes its folder).
        base_dir = (info.context or {}).get("base_dir") or Path.cwd()
        try:
            path, text = read_prompt_file(prompt, Path(base_dir))
        except PromptError as error:
            raise ValueError(f"judge {data.get('id')!r}: {error}") from None
        return {**data, "prompt": str(path), "prompt_text": text}

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, provider: str) -> str:
        if provider not in UNCALLED_PROVIDERS:
            registered_provider(provider)  # raises UnknownProviderError, a ValueError
        return provider

    @field_validator("id")
    @classmethod
    def _not_reserved(cls, judge_id: str) -> str:
        # The analysis views list the panel's consensus (and the human labels) as rows
        # beside the judges: a judge of the same name would merge into that row.
        if judge_id.casefold() in RESERVED_JUDGE_IDS:
            raise ValueError(
                f"judge id {judge_id!r} is reserved ('consensus' names the panel's combined "
                "answer and 'gold' the human labels in the analysis views): rename the judge"
            )
        return judge_id

    @model_validator(mode="before")
    @classmethod
    def _pairwise_orders(cls, data: Any) -> Any:
        """A pairwise judge is asked once in each order: its two samples are the orders."""
        if not isinstance(data, dict) or data.get("provider") in ("offline", "recorded"):
            return data
        if not _asks_preference(data):
            return data
        if data.get("samples", 1) not in (1, 2):
            raise ValueError(
                f"judge {data.get('id')!r}: a pairwise judge is asked once in each order (its "
                f"two samples are the orders), so samples: {data['samples']} is not supported; "
                "remove 'samples' (or the panel's)"
            )
        return {**data, "samples": 2}

    @model_validator(mode="after")
    def _provider_fields(self) -> JudgeSpec:
        if self.provider == "recorded":
            return self._recorded_fields()
        if self.provider == "offline":
            if not self.detector:
                raise ValueError(f"judge {self.id!r}: an offline judge needs 'detector'")
        else:
            if not self.model:
                raise ValueError(f"judge {self.id!r}: provider {self.provider} needs 'model'")
            if not self.prompt:
                raise ValueError(f"judge {self.id!r}: provider {self.provider} needs 'prompt'")
        if self.provider == "offline" and self.samples > 1:
            raise ValueError(
                f"judge {self.id!r}: an offline detector answers the same every time, so "
                f"its {self.samples} samples would be copies; remove 'samples'"
            )
        if self.provider == "offline" and self.batch:
            raise ValueError(
                f"judge {self.id!r}: an offline detector makes no model call, so it has no "
                "batch to join; remove 'batch'"
            )
        if self.prompt_text is None:
            for name in ("output", "span_variable"):
                if getattr(self, name) is not None:
                    raise ValueError(
                        f"judge {self.id!r}: '{name}' is declared by a prompt file "
                        "(prompt: ./my_prompt.txt); a catalogue prompt declares its own, "
                        f"so remove '{name}'"
                    )
        return self

    def _recorded_fields(self) -> JudgeSpec:
        """A recorded judge declares what it answered with (``output``), nothing to call."""
        called = [
            name
            for name in ("prompt", "detector", "base_url", "api_key_env", "api_key_secret")
            if getattr(self, name) is not None
        ]
        if self.batch:
            called.append("batch")
        if called:
            raise ValueError(
                f"judge {self.id!r}: a recorded judge is never called, so it takes no "
                f"{', '.join(repr(c) for c in called)}; remove them"
            )
        return self

    @property
    def output_kind(self) -> Literal["score", "spans", "preference"]:
        """What the judge answers with: spans for a detector, its ``output`` for a recorded
        judge (score when unset), its prompt's for an LLM judge (raises PromptError)."""
        if self.provider == "offline":
            return "spans"
        if self.provider == "recorded":
            return self.output or "score"
        return self.template().output_kind

    @property
    def prompt_file(self) -> bool:
        """The prompt is a file's text (carried in ``prompt_text``), not a catalogue name."""
        return self.prompt_text is not None

    def template(self) -> PromptTemplate:
        """The judge's prompt template; raises PromptError (this judge needs a prompt)."""
        from juryflow.prompts.files import file_template
        from juryflow.prompts.loader import PromptError, load_template

        if self.prompt is None:
            raise PromptError(f"judge {self.id!r} has no prompt")
        if self.prompt_text is None:
            return load_template(self.prompt)
        return file_template(
            self.prompt, self.prompt_text, self.output, self.span_variable, self.verdict_threshold
        )

    @property
    def key_env(self) -> str | None:
        if self.provider in UNCALLED_PROVIDERS:
            return None
        return self.api_key_env or registered_provider(self.provider).key_env

    def credentials(self) -> list[str]:
        """Secret values the panel file itself holds: header values, base_url credentials."""
        return header_secrets(self.headers) + url_secrets(self.base_url)

    def public_dict(self) -> dict[str, Any]:
        """This judge as it may be stored or shown: header values and URL credentials masked.

        Header names stay (they say which headers a resumed run needs); their values could
        be credentials whatever the name, so none is kept.
        """
        data = self.model_dump(mode="json")
        data["headers"] = {name: "<redacted>" for name in self.headers}
        # Runs stored before these keys existed compare equal.
        if self.family is None:
            del data["family"]
        if self.samples == 1:
            del data["samples"]
        if self.sample_reducer is None and self.samples == 1:
            del data["sample_reducer"]
        elif self.sample_reducer is None:
            # Stored with the run by name: the reducer its judgments were reduced by.
            from juryflow.maths.samples.reducers import resolve_sample_reducer

            data["sample_reducer"] = resolve_sample_reducer(None, self.output_kind)
        if self.base_url is not None:
            data["base_url"] = redact_url(self.base_url)
        return data

    def call_parameters(self) -> dict[str, Any]:
        """What, besides the rendered prompt, changes a model's answer (the cache key's part)."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "structured_output": self.structured_output,
            # Masked: the cache key is stored, and a hash over a password can be brute-forced.
            "base_url": redact_url(self.base_url) if self.base_url is not None else None,
        }


class PanelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "panel"
    quorum: int | None = Field(default=None, ge=1)
    """How many judges must answer for a consensus; default: a majority of the panel."""
    judges: tuple[JudgeSpec, ...] = Field(min_length=1)
    prices: dict[str, Price] = Field(default_factory=dict)
    """Overrides of the built-in price table, keyed by model name."""
    consensus: dict[str, Any] | None = None
    """The consensus rule (``score``, ``spans``, ``verdict``, ``weights``); see
    :mod:`juryflow.maths.reducers`. Default: median scores, majority-overlap spans, verdict
    auto."""
    early_stop: bool = False
    """Call a judge on an item only while its answer can still change the consensus (exact:
    see :mod:`juryflow.maths.early_stop`); a judge left out is stored as ``skipped:
    decided``. Rules that cannot prove it (weighted, Dawid–Skene) call every judge."""
    audit_fraction: float = Field(default=0.1, ge=0.0, le=1.0)
    """With ``early_stop``: the share of items (seeded) that every judge judges anyway, the
    random sample agreement is measured on."""
    lossy_agreement: float | None = Field(default=None, ge=0.0, le=1.0)
    """With ``early_stop``: also stop an item, lossily, once the judges called first all
    answered, agree on the verdict and their spans agree with at least this character F1;
    the judges left out count as failed (``skipped: lossy``). Not proved exact: run
    ``juryflow calibrate`` on a fully judged labelled run to see what it costs out of fold.
    None (default): exact stops only."""
    judge_order: Literal["price", "panel"] = "price"
    """With ``early_stop``: which judges are called first — the cheapest by the price table
    (``price``), or the panel file's order (``panel``)."""
    batch: bool = False
    """Send the LLM judges' calls through their providers' batch APIs (OpenAI Batch,
    Anthropic Message Batches): half the price, answers within 24 hours. A judge's own
    ``batch`` overrides it; offline detectors judge as ever."""
    samples: int | None = Field(default=None, ge=1, le=100)
    """The ``samples`` of every LLM judge that does not set its own (offline detectors are
    deterministic: they keep one)."""

    @model_validator(mode="before")
    @classmethod
    def _panel_samples(cls, data: Any) -> Any:
        from juryflow.judges.sampling.panel_samples import spread_panel_samples

        return spread_panel_samples(data)

    @field_validator("judges", mode="before")
    @classmethod
    def _some_judges(cls, judges: Any) -> Any:
        # Before pydantic's own checks: "Tuple should have at least 1 item" does not say what
        # to write; a bare `judges:` (None) is the same mistake.
        if judges is None or (isinstance(judges, list | tuple) and not judges):
            raise ValueError(
                "no judge listed; list at least one, e.g. "
                "- {id: numbers, provider: offline, detector: numbers}"
            )
        return judges

    @field_validator("judges")
    @classmethod
    def _unique_ids(cls, judges: tuple[JudgeSpec, ...]) -> tuple[JudgeSpec, ...]:
        seen: set[str] = set()
        for judge in judges:
            if judge.id in seen:
                raise ValueError(f"duplicate judge id {judge.id!r}: each judge needs its own id")
            seen.add(judge.id)
        return judges

    @model_validator(mode="after")
    def _quorum_fits(self) -> PanelSpec:
        if self.quorum is not None and self.quorum > len(self.judges):
            raise ValueError(
                f"quorum {self.quorum} is larger than the panel ({len(self.judges)} judges)"
            )
        return self

    @model_validator(mode="after")
    def _consensus_rule(self) -> PanelSpec:
        from juryflow.maths.reducers import (
            ConsensusRule,  # the panel schema stays importable alone
        )
        from juryflow.prompts.loader import PromptError

        rule = ConsensusRule.from_dict(self.consensus)
        rule.check_judges([j.id for j in self.judges])
        if rule.score.name == "dawid_skene":
            # Only then: knowing the judges' kind loads their prompts, which a panel is
            # checked without (an unknown prompt is named by the prompt check, with its fix).
            try:
                pairwise = self.pairwise
            except PromptError:
                return self
            rule.check_kind(pairwise=pairwise)
        return self

    @model_validator(mode="after")
    def _sampling(self) -> PanelSpec:
        from juryflow.judges.sampling.panel_samples import check_sampling, pairwise_mix

        check_sampling(self)
        mixed = pairwise_mix(self)
        if mixed is not None:
            raise ValueError(mixed)
        return self

    @property
    def pairwise(self) -> bool:
        """Every judge compares two answers (a panel is all pairwise or none)."""
        return bool(self.judges) and all(j.output_kind == "preference" for j in self.judges)

    @property
    def all_span_judges(self) -> bool:
        """Every judge answers with spans (offline detectors, span prompts, recorded spans)."""
        return all(j.output_kind == "spans" for j in self.judges)

    def consensus_rule(self) -> ConsensusRule:
        """The panel's consensus rule, with ``verdict: auto`` resolved for its judges."""
        from juryflow.maths.reducers import ConsensusRule

        consensus = dict(self.consensus or {})
        if self.pairwise:
            # A preference's median is no verdict (A and B make a "tie" of 0.5 by
            # averaging): the plurality of the consistent verdicts is.
            consensus.setdefault("score", "preference")
        return ConsensusRule.from_dict(consensus).resolve(self.all_span_judges)

    @property
    def effective_quorum(self) -> int:
        return self.quorum if self.quorum is not None else default_quorum(len(self.judges))

    def public_dict(self) -> dict[str, Any]:
        """The panel as stored with a run (``runs.panel``): no header value, no URL credential."""
        data = self.model_dump(mode="json")
        data["judges"] = [judge.public_dict() for judge in self.judges]
        if self.samples is None:  # runs stored before the key existed compare equal
            del data["samples"]
        return data

    def uses_batch(self, spec: JudgeSpec) -> bool:
        """Whether ``spec``'s calls go through its provider's batch API in this panel."""
        if spec.provider in UNCALLED_PROVIDERS:
            return False
        return spec.batch if spec.batch is not None else self.batch

    def judge(self, judge_id: str) -> JudgeSpec:
        for spec in self.judges:
            if spec.id == judge_id:
                return spec
        raise KeyError(judge_id)


DEFAULT_PANEL = PanelSpec(
    name="offline-default",
    judges=(
        JudgeSpec(id="numbers", provider="offline", detector="numbers"),
        JudgeSpec(id="names", provider="offline", detector="names"),
        JudgeSpec(id="content", provider="offline", detector="content"),
    ),
    # Specialists: each detector looks for one kind of error (numbers, names, unsupported
    # content), so two of them almost never mark the same characters and a majority of
    # characters almost never forms. Their union is the panel's answer, and the verdict is
    # "the union marks something", so verdict and spans cannot disagree.
    consensus={"score": "median", "spans": "union", "verdict": "spans"},
)
"""The embedded offline panel: three detectors that need no network and no weights."""


def parse_panel(data: Any, source: str = "panel", base_dir: Path | None = None) -> PanelSpec:
    """The panel ``data`` describes; prompt files are read relative to ``base_dir`` (default:
    the working directory), unless ``data`` carries their text (a stored run's panel)."""
    if not isinstance(data, dict):
        raise PanelError(f"{source}: a panel file must be a mapping with 'judges'")
    try:
        panel = PanelSpec.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as error:
        errors = error.errors()
        # A judge that fails validation leaves the list short too: that is no second problem.
        inside = any(e["loc"][:1] == ("judges",) and len(e["loc"]) > 1 for e in errors)
        errors = [e for e in errors if not (inside and e["loc"] == ("judges",))]
        problems = "; ".join(_problem(e["loc"], _message(e)) for e in errors)
        raise PanelError(f"{source}: {problems}") from None
    _check_references(panel, source)
    return panel


_KEYS_AT: dict[str, Any] = {}
"""The keys a mapping under each top-level key takes (filled once the classes exist)."""


def _message(error: Any) -> str:
    """pydantic's message, or for a key the panel does not take, the closest one it does."""
    if error["type"] != "extra_forbidden":
        return str(error["msg"])
    loc = error["loc"]
    keys = _KEYS_AT.get(str(loc[0]) if len(loc) > 1 else "", PanelSpec.model_fields)
    close = closest(loc[-1], keys)
    hint = f"did you mean {close!r}?" if close else "docs/reference/panel-keys.md lists them"
    return f"not a key this takes ({hint})"


def _problem(loc: tuple[int | str, ...], message: str) -> str:
    # pydantic prefixes the text of a ValueError raised in a validator; the user wants ours.
    message = message.removeprefix("Value error, ")
    where = ".".join(str(p) for p in loc)
    return f"{where}: {message}" if where else message


def _check_references(panel: PanelSpec, source: str) -> None:
    # Imported here: the prompt catalogue and detector registry live in other modules and
    # the panel schema must stay importable on its own.
    from juryflow.judges.detectors.registry import detector_names
    from juryflow.prompts.loader import PromptError

    for judge in panel.judges:
        if judge.prompt is not None:
            try:
                judge.template()
            except PromptError as error:
                hint = ""
                if str(error).startswith("unknown prompt"):
                    hint = "; a prompt file is given by its path, e.g. ./my_prompt.txt"
                raise PanelError(f"{source}: judge {judge.id!r}: {error}{hint}") from None
        if judge.provider == "offline" and judge.detector not in detector_names():
            raise PanelError(
                f"{source}: judge {judge.id!r}: unknown detector {judge.detector!r}"
                f"{did_you_mean(judge.detector, detector_names())}; "
                f"known detectors: {', '.join(detector_names())}"
            )


def load_panel(path: str | Path | None) -> PanelSpec:
    """The panel in ``path``, or the embedded offline default when ``path`` is None."""
    if path is None:
        return DEFAULT_PANEL
    file = Path(path)
    if not file.is_file():
        raise PanelError(f"panel file {file} does not exist")
    size = file.stat().st_size
    if size > MAX_PANEL_BYTES:
        raise PanelError(
            f"{file}: {size:,} bytes, over the limit of {MAX_PANEL_BYTES:,} for a panel file; "
            "a panel names its judges, and prompts go in files of their own"
        )
    try:
        data = load_yaml(file.read_text(encoding="utf-8"))
    except NestingError as error:
        raise PanelError(f"{file}: {error}") from None
    except yaml.YAMLError as error:
        # PyYAML's own message spans lines (context, a caret drawing); the gist fits one.
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise PanelError(f"{file}: not valid YAML{where}: {problem}") from None
    _refuse_prompt_text(data, str(file))
    panel = parse_panel(data, str(file), base_dir=file.resolve().parent)
    recorded = [spec.id for spec in panel.judges if spec.provider == "recorded"]
    if recorded:
        raise PanelError(f"{file}: judge {recorded[0]!r}: {RECORDED_REFUSAL}")
    return panel


def _refuse_prompt_text(data: Any, source: str) -> None:
    # prompt_text is juryflow's copy of a prompt file; written by hand it would be a second,
    # unchecked way of giving a prompt.
    judges = data.get("judges") if isinstance(data, dict) else None
    for judge in judges if isinstance(judges, list) else ():
        if isinstance(judge, dict) and "prompt_text" in judge:
            raise PanelError(
                f"{source}: judge {judge.get('id')!r}: 'prompt_text' is filled in by juryflow; "
                "put the text in a file and give its path as 'prompt: ./my_prompt.txt'"
            )


_KEYS_AT.update(judges=JudgeSpec.model_fields, prices=Price.model_fields)


def _asks_preference(data: dict[str, Any]) -> bool:
    """A judge's raw panel entry names a pairwise prompt (catalogue or ``output:``)."""
    from juryflow.prompts.loader import PromptError, load_template

    if data.get("output") == "preference":
        return True
    prompt = data.get("prompt")
    if not isinstance(prompt, str) or data.get("prompt_text") is not None:
        return False
    try:
        return load_template(prompt).output_kind == "preference"
    except PromptError:
        return False  # a prompt file, or an unknown name the prompt check reports
