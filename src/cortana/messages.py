"""The stable internal format: messages, images, tool calls, run results and metrics.

Every engine adapter converts its wire format into these models and nothing
else leaves an adapter, so the loop, memory and the CLI never see an engine's
own response objects.

An :class:`Image` travels with its user message: its bytes (checked by their
magic bytes, bounded by :data:`MAX_IMAGE_BYTES`) or, for servers that fetch
them, its ``http(s)`` URL. Memory stores a message with its images' bytes
(base64 in the message's JSON), so a thread reloaded later still shows the
model what the user showed it, even after the file moved or changed.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence
from typing import Any, BinaryIO, Generic, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from typing_extensions import TypeVar

__all__ = [
    "CHECK_IN_NAME",
    "IMAGE_TOKENS",
    "IMAGE_TYPES",
    "LOOP_NAME",
    "MAX_IMAGES",
    "MAX_IMAGE_BYTES",
    "STAND_IN_NAMES",
    "Approval",
    "Image",
    "ImageError",
    "ImageType",
    "Message",
    "OutputT",
    "PendingApproval",
    "Refusal",
    "Role",
    "RunMetrics",
    "RunResult",
    "RunState",
    "RunStatus",
    "StopReason",
    "ThreadRef",
    "ToolCall",
    "Usage",
    "checked_image_bytes",
    "image_type",
    "images_of",
    "is_users_own",
]

Role = Literal["system", "user", "assistant", "tool"]
Refusal = Literal["policy", "approval", "hook"]
"""Why a tool call was refused before it ran: ``policy`` a rule or check of the permission gate said no;
``approval`` it needed an approval that was not given (declined, nobody there to ask, or an approver that
cannot ask, as over an API); ``hook`` a ``before_tool`` hook of the user's said no."""

CHECK_IN_NAME = "heartbeat"
"""The ``name`` of the user-role note a delivered check-in stores in the user's place."""
LOOP_NAME = "cortana"
"""The ``name`` of a user-role message the loop writes itself (a nudge to answer, a retry of a failed call)."""
STAND_IN_NAMES = (CHECK_IN_NAME, LOOP_NAME)
"""Names of user-role messages that are not the user's words: "when the user last wrote" and what the user
said skip them."""
OutputT = TypeVar("OutputT", default=Any)
"""The type of ``RunResult.output``: ``str`` for an agent without ``output_type``, else that type. A bare
``RunResult`` is ``RunResult[Any]``; ``Agent[T].run`` returns ``RunResult[T]`` (``Agent`` infers ``T`` from
``output_type``). At run time the result is never parametrized: pydantic keeps the value as the run made it."""
StopReason = Literal["stop", "length"]
"""Why a run ended: ``stop`` the model finished its answer; ``length`` it hit the token limit."""
RunStatus = Literal["done", "paused"]
"""How a run ended: ``done`` with its answer; ``paused`` at tool calls a person must allow first
(``defer_approvals=True``): ``RunResult.state`` goes on with it (``Agent.resume``)."""
Approval = bool | str
"""A person's answer to a pending call: ``True`` runs it; ``False`` refuses it; a string refuses it and tells the
model why."""


ImageType = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]
"""The kinds of image a message may carry: what every vision engine Cortana speaks to decodes."""
IMAGE_TYPES: dict[str, str] = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}
"""Each :data:`ImageType` with its name for people."""
MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""The most bytes one image may have (20 MB). A larger one is an :class:`ImageError` naming both sizes: it is sent
whole with every later request of the thread and stored in memory, and a screenshot is far smaller."""
MAX_IMAGES = 8
"""The most images one message may carry."""
IMAGE_TOKENS = 768
"""The tokens one image is counted as where they cannot be counted (estimates, compaction, fitting the window).
Models spend different amounts: Gemma 3 256 a picture, LLaVA 1.5 576, Qwen2.5-VL one per 28x28 pixels (about 1,300
for a 1,000-pixel square); 768 sits above the fixed costs and is a middle guess for the growing ones."""
_MB = 1024 * 1024


class ImageError(ValueError):
    """An image Cortana cannot take: too large, not a PNG, JPEG, GIF or WebP, or with no source.

    A ``ValueError`` (a bad value); :class:`Image` itself raises pydantic's ``ValidationError`` with the same words.
    """


def image_type(data: bytes) -> ImageType | None:
    """The kind of image ``data`` is, from its first bytes (its magic number), or ``None`` when it is none of them."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _size(count: int) -> str:
    if count >= _MB // 10:
        return f"{count / _MB:.1f} MB"
    return f"{count / 1024:.1f} KB" if count >= 1024 else f"{count} bytes"


def _too_large(label: str, size: int) -> ImageError:
    return ImageError(
        f"{label} is {_size(size)}; an image may be at most {MAX_IMAGE_BYTES // _MB} MB. Send a smaller one "
        "(a screenshot of the part that matters, or the picture as a JPEG)."
    )


def checked_image_bytes(data: bytes, label: str) -> ImageType:
    """The kind of image ``data`` is, after checking it is one Cortana takes (``label`` names it in errors).

    Raises:
        ImageError: it is empty, larger than :data:`MAX_IMAGE_BYTES`, or not a PNG, JPEG, GIF or WebP image.
    """
    if not data:
        raise ImageError(f"{label} is empty: give the bytes of a PNG, JPEG, GIF or WebP image")
    if len(data) > MAX_IMAGE_BYTES:
        raise _too_large(label, len(data))
    kind = image_type(data)
    if kind is None:
        raise ImageError(
            f"{label} is not a PNG, JPEG, GIF or WebP image (its first bytes are {data[:8]!r}); convert it to one"
        )
    return kind


class Image(BaseModel):
    """An image a user message shows the model (``Message.user(text, images=[...])``, ``agent.run(..., images=)``).

    Give its bytes (``Image(data=...)``, or :meth:`from_path`) or, for an OpenAI-compatible server that fetches
    images itself, its ``http(s)`` URL (``Image(url=...)``; a ``data:`` URL becomes bytes). Ollama and llama.cpp are
    sent bytes only: Cortana fetches nothing for a local engine. Bytes are checked by their magic number (PNG, JPEG,
    GIF or WebP) and bounded by :data:`MAX_IMAGE_BYTES`; a bad image raises pydantic's ``ValidationError`` saying
    what is wrong (:meth:`from_path` raises :class:`ImageError`).

    Attributes:
        name: where it came from, for people and for the model's note when it cannot be shown (a file name).
        data: the image's bytes (stored base64 in the message's JSON).
        media_type: its kind, read from the bytes (given for bytes, it must agree with them); optional for a URL.
        url: the image's ``http(s)`` address, for servers that fetch it.
    """

    model_config = ConfigDict(frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    name: str | None = None
    data: bytes | None = None
    media_type: ImageType | None = Field(default=None, validate_default=True)
    url: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _data_url(cls, values: Any) -> Any:
        """A ``data:image/...;base64,`` URL given as ``url`` becomes the bytes it holds."""
        if not isinstance(values, dict) or not str(values.get("url") or "").startswith("data:"):
            return values
        header, _, payload = str(values["url"]).partition(",")
        if not header.endswith(";base64"):
            raise ImageError("a data: URL image must be base64 (data:image/png;base64,...)")
        try:
            data = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise ImageError("the data: URL image is not valid base64") from None
        return {**values, "url": None, "data": data}

    @field_validator("data")
    @classmethod
    def _known_kind(cls, data: bytes | None, info: ValidationInfo) -> bytes | None:
        if data is not None:
            checked_image_bytes(data, info.data.get("name") or "the image")
        return data

    @field_validator("media_type")
    @classmethod
    def _kind_of_data(cls, media_type: ImageType | None, info: ValidationInfo) -> ImageType | None:
        data = info.data.get("data")
        if not isinstance(data, bytes):
            return media_type
        found = image_type(data)
        if media_type is not None and media_type != found:
            label = info.data.get("name") or "the image"
            raise ImageError(f"{label} was given as {media_type}, but its bytes are a {IMAGE_TYPES[str(found)]} image")
        return found

    @field_validator("url")
    @classmethod
    def _web_address(cls, url: str | None) -> str | None:
        if url is not None and not url.lower().startswith(("http://", "https://")):
            raise ImageError(f"an image URL must be http(s)://, not {url[:80]!r}: give a file as Image.from_path(...)")
        return url

    @model_validator(mode="after")
    def _one_source(self) -> Image:
        if (self.data is None) == (self.url is None):
            raise ImageError("an Image needs one source: its bytes (data=, or Image.from_path) or its URL (url=)")
        return self

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], *, name: str | None = None) -> Image:
        """The image in the file at ``path`` (its size checked before it is read).

        Raises:
            ImageError: the file is missing, larger than :data:`MAX_IMAGE_BYTES`, or not a PNG, JPEG, GIF or WebP.
        """
        label = name or os.path.basename(os.fspath(path))
        try:
            with open(path, "rb") as handle:
                return cls.from_file(handle, label)
        except OSError as error:
            raise ImageError(f"cannot read the image {os.fspath(path)}: {error.strerror or error}") from None

    @classmethod
    def from_file(cls, handle: BinaryIO, name: str | None = None) -> Image:
        """The image in an open file (its size checked before it is read, the read bounded all the same).

        Raises:
            ImageError: the file is larger than :data:`MAX_IMAGE_BYTES`, or not a PNG, JPEG, GIF or WebP image.
        """
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_IMAGE_BYTES:
            raise _too_large(name or "the image", size)
        return cls.of_bytes(handle.read(MAX_IMAGE_BYTES + 1), name)  # a file that grew meanwhile is still bounded

    @classmethod
    def of_bytes(cls, data: bytes, name: str | None = None) -> Image:
        """An image of ``data``, checked first so a bad one raises :class:`ImageError` rather than pydantic's error."""
        kind = checked_image_bytes(data, name or "the image")
        return cls(name=name, data=data, media_type=kind)

    def __repr_args__(self) -> Any:
        """Its fields, the bytes as their count: a message's repr (a log line, a traceback) never holds megabytes."""
        for key, value in super().__repr_args__():
            yield (key, f"<{len(value)} bytes>") if key == "data" and value is not None else (key, value)

    @property
    def size(self) -> int:
        """Its bytes' count (0 for a URL)."""
        return len(self.data or b"")

    @property
    def label(self) -> str:
        """The image for people: its name, else its URL, else its kind and size."""
        if self.name:
            return self.name
        if self.url:
            return self.url
        return f"a {IMAGE_TYPES.get(str(self.media_type), 'picture')} of {_size(self.size)}"

    def describe(self) -> str:
        """Its label with its kind and size (``shot.png (PNG, 41.2 KB)``)."""
        if self.data is None or not self.name:
            return self.label
        return f"{self.label} ({IMAGE_TYPES.get(str(self.media_type), 'image')}, {_size(self.size)})"

    def base64(self) -> str:
        """Its bytes in standard base64, as Ollama's ``images`` and a ``data:`` URL carry them."""
        return base64.b64encode(self.data or b"").decode("ascii")

    def data_url(self) -> str:
        """A ``data:`` URL of its bytes; for an image given by URL, that URL."""
        if self.data is None:
            return self.url or ""
        return f"data:{self.media_type};base64,{self.base64()}"


class ToolCall(BaseModel):
    """One tool call requested by the model.

    Attributes:
        id: the call's id, unique within the run; tool results refer to it.
        name: the tool's name, as the model wrote it.
        arguments: the parsed arguments. Empty when they did not parse.
        raw_arguments: the argument text exactly as the model wrote it, kept
            when it did not parse as a JSON object so the model can be shown its mistake.
        from_text: the model wrote this call as text and Cortana recovered it
            (the engine returned no structured call).
        extra: a further call the model added to a guided answer after the one it
            set out to make (``cortana.models.guided``); the loop runs it only when
            the conversation holds every argument it can check.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    raw_arguments: str | None = None
    from_text: bool = False
    extra: bool = False


class Message(BaseModel):
    """One chat message in Cortana's own format.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: the text. For a tool message, the tool's result as text.
        tool_calls: the calls an assistant message requests.
        tool_call_id: for a tool message, the id of the call it answers.
        name: for a tool message, the tool's name.
        thinking: the model's reasoning text, when the engine separates it.
        is_error: for a tool message, whether the tool failed.
        refusal: for a tool message, why the call was refused before it ran (``None``: it was not refused);
            a refused call also has ``is_error``, and its text says why to the model.
        images: for a user message, the images it shows the model (at most :data:`MAX_IMAGES`), stored with it.
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    thinking: str | None = None
    is_error: bool = False
    refusal: Refusal | None = None
    images: list[Image] = Field(default_factory=list)

    @field_validator("images")
    @classmethod
    def _users_images(cls, images: list[Image], info: ValidationInfo) -> list[Image]:
        if images and info.data.get("role") != "user":
            raise ImageError(f"only a user message carries images (this one's role is {info.data.get('role')!r})")
        if len(images) > MAX_IMAGES:
            raise ImageError(f"a message may carry at most {MAX_IMAGES} images, not {len(images)}")
        return images

    @classmethod
    def system(cls, content: str) -> Message:
        """A system message."""
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str, images: Sequence[Image] = ()) -> Message:
        """A user message, showing the model ``images`` (see :class:`Image`)."""
        if images:
            return cls(role="user", content=content, images=list(images))
        return cls(role="user", content=content)

    def without_images(self, why: str) -> Message:
        """This message with a line in place of each image (``[image shot.png: not shown, <why>]``), for a model that
        cannot be shown them: it reads that there was one, rather than the conversation losing it unsaid."""
        if not self.images:
            return self
        notes = "\n".join(f"[image {image.label}: not shown, {why}]" for image in self.images)
        return self.model_copy(update={"images": [], "content": f"{self.content}\n{notes}" if self.content else notes})

    @classmethod
    def assistant(cls, content: str = "", tool_calls: list[ToolCall] | None = None) -> Message:
        """An assistant message, optionally requesting tool calls."""
        return cls(role="assistant", content=content, tool_calls=tool_calls or [])

    @classmethod
    def tool(cls, call: ToolCall, content: str, *, is_error: bool = False) -> Message:
        """The result of ``call``."""
        return cls(role="tool", content=content, tool_call_id=call.id, name=call.name, is_error=is_error)


class Usage(BaseModel):
    """Token counts one model call reported.

    Attributes:
        prompt_tokens: tokens in the prompt, cached ones included.
        completion_tokens: tokens the model generated.
        cached_tokens: prompt tokens the engine reused from its cache instead of re-reading.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    @property
    def processed_prompt_tokens(self) -> int:
        """Prompt tokens the engine actually had to read (not served from cache)."""
        return max(self.prompt_tokens - self.cached_tokens, 0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
        )


class RunMetrics(BaseModel):
    """What one run cost. Times are seconds.

    Attributes:
        elapsed: wall time of the whole run.
        model_time: wall time spent waiting for the model.
        tool_time: wall time spent running tool batches (parallel calls overlap).
        model_calls: requests sent to the model.
        tool_calls: tool calls the model requested (run, denied or failed).
        tool_errors: tool calls that ended in an error result.
        unknown_tool_calls: calls of a tool that was not offered (nor in a group that could be loaded): never started;
            the model reads that no such tool exists.
        subagent_spawns: subagents started during the run.
        subagent_prompt_tokens: prompt tokens the run's subagents used.
        subagent_completion_tokens: tokens the run's subagents generated.
        compactions: times the conversation was summarized to fit the context window.
        output_calls: model calls that asked for the typed answer (``output_type``) after the agent's own
            answer: the answer as JSON, or again after a value that did not validate. Counted in ``model_calls``.
        prompt_tokens: prompt tokens over all model calls.
        completion_tokens: generated tokens over all model calls.
        cached_prompt_tokens: prompt tokens the engine served from its cache.
    """

    elapsed: float = 0.0
    model_time: float = 0.0
    tool_time: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    unknown_tool_calls: int = 0
    subagent_spawns: int = 0
    subagent_prompt_tokens: int = 0
    subagent_completion_tokens: int = 0
    compactions: int = 0
    output_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0

    def add_usage(self, usage: Usage) -> None:
        """Count one model call's tokens."""
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cached_prompt_tokens += usage.cached_tokens

    def merge(self, other: RunMetrics) -> RunMetrics:
        """A new ``RunMetrics`` with every count of ``self`` and ``other`` summed."""
        return RunMetrics(**{name: getattr(self, name) + getattr(other, name) for name in type(self).model_fields})


class ThreadRef(BaseModel):
    """Who a conversation belongs to.

    Attributes:
        resource_id: the user, project or workspace that owns conversations.
        thread_id: one conversation of that resource.
    """

    model_config = ConfigDict(frozen=True)

    resource_id: str = "default"
    thread_id: str = "default"


class PendingApproval(BaseModel):
    """A tool call a paused run waits on: a person allows or refuses it (``Agent.resume(state, approvals)``).

    Attributes:
        call_id: the call's id: the key of its answer in ``approvals``.
        tool: the tool's name.
        arguments: the arguments, as the model wrote them.
        reason: why it needs a person (the tool requires approval, a rule of the permission gate asks).
    """

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""


class RunState(BaseModel):
    """A run paused for approvals: all it takes to go on with it, in this process or another.

    ``state.model_dump_json()`` keeps it; ``RunState.model_validate_json(text)`` reads it back; then
    ``agent.resume(state, approvals)`` on an agent built the same way (memory on the same store) finishes the turn.

    Attributes:
        version: the format's version (a state of another version is refused).
        agent: the name of the agent that ran it; only an agent of that name resumes it.
        tools: every tool the run offered: its name -> a hash of its parameters' schema. An agent whose tools
            differ (one renamed, gone, added, or with other parameters) cannot resume it.
        thread: the conversation.
        prompt: the user's message as the caller gave it.
        messages: what the model was shown, in order (system prompt, history, the turn's user message with its
            context, the turn's rounds so far), ending with the assistant message whose calls wait. Nothing of
            that round is in memory yet: it is stored whole, results in request order, when the run goes on.
        turn_start: index in ``messages`` of the turn's first message still there (see ``summarized``).
        summarized: the turn's first messages, when a compaction took them out of ``messages`` (usually none).
        results: the results of the paused round's calls that did not wait (they ran, or were refused, before it
            paused); they do not run again.
        pending: the calls that wait for a person's answer.
        iterations: rounds of tool calls spent; ``iteration_limit``: how many the run may spend.
        metrics: what the run cost so far.
        changed_by: the tools that ran and are not read-only, so far.
        loaded_groups: the tool groups the run loaded (loaded again when it goes on).
        settings: the turn's generation settings (``ModelSettings``' fields).
        remember: whether the turn is stored in memory.
        once: the loop's once-only steps already taken (``nudged``, ``asked_again``, ``retried``).
    """

    version: Literal[1] = 1
    agent: str
    tools: dict[str, str]
    thread: ThreadRef
    prompt: str
    messages: list[Message]
    turn_start: int
    summarized: list[Message] = Field(default_factory=list)
    results: list[Message] = Field(default_factory=list)
    pending: list[PendingApproval]
    iterations: int
    iteration_limit: int
    metrics: RunMetrics
    changed_by: list[str] = Field(default_factory=list)
    loaded_groups: list[str] = Field(default_factory=list)
    settings: dict[str, Any] = Field(default_factory=dict)
    remember: bool = True
    once: list[Literal["nudged", "asked_again", "retried"]] = Field(default_factory=list)


class RunResult(BaseModel, Generic[OutputT]):
    """The outcome of one completed run; ``RunResult[T]``: one whose ``output`` is a ``T``.

    Attributes:
        output: the model's final answer text; with ``Agent(output_type=...)``, the validated value.
        new_messages: every message this run added (user message first).
        metrics: what the run cost.
        thread: the conversation the run belongs to.
        stop_reason: why the final model call ended.
        changed_by: the names of the tools that ran in this turn and are not read-only (writes,
            edits, commands, outside servers' tools), in the order they ran: what may have
            changed the workspace. Empty when the turn only read.
        prompt: the user's message as the caller gave it (``new_messages[0]`` also holds the turn's context).
        status: ``done``; or ``paused`` at calls a person must allow first (``defer_approvals=True``): then
            ``output`` is what the model said with its calls (``None`` with an ``output_type``), ``new_messages``
            end with the assistant message whose calls wait, and ``pending_approvals`` and ``state`` are set.
        pending_approvals: the calls the paused run waits on (empty when it is done).
        state: the paused run, to go on with (``Agent.resume``); ``None`` when it is done.
    """

    output: OutputT
    new_messages: list[Message]
    metrics: RunMetrics
    thread: ThreadRef
    stop_reason: StopReason = "stop"
    changed_by: list[str] = Field(default_factory=list)
    prompt: str = ""
    status: RunStatus = "done"
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    state: RunState | None = None


def images_of(messages: Sequence[Message]) -> list[Image]:
    """Every image ``messages`` carry, in order."""
    return [image for message in messages for image in message.images]


def is_users_own(message: Message) -> bool:
    """Whether ``message`` is the user's own words: a user-role message that is no stand-in (a check-in's note,
    the loop's nudge or retry; see ``STAND_IN_NAMES``). Memory's ``last_user_message_at`` asks the same of
    stored rows in SQL, by the same names."""
    return message.role == "user" and message.name not in STAND_IN_NAMES
