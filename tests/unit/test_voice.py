"""Voice: Markdown read as prose, real espeak-ng speech in a WAV file, and speech that never blocks."""

from __future__ import annotations

import array
import asyncio
import os
import wave
from collections.abc import Callable
from pathlib import Path

import pytest

from cortana import UserError, Voice
from cortana.companion.voice import find_tts, speakable_text

REPLY = """## Your day

Your call with **Sam** starts at *15:00*; the notes are in [the plan](https://example.com/plan.md).

```python
def remind():
    return "call Sam"
```

| time | what |
|------|------|
| 15:00 | call |

- Bring `notes.txt`.
"""


def test_markdown_is_read_as_prose() -> None:
    text = speakable_text(REPLY)
    assert "Your day" in text and "#" not in text and "*" not in text and "`" not in text
    assert "the notes are in the plan." in text and "https" not in text
    assert "def remind" not in text and "(code block, shown on screen.)" in text
    assert "time, what" in text and "15:00, call" in text and "---" not in text
    assert "Bring notes.txt." in text


def test_long_replies_are_cut_at_a_sentence_and_control_characters_dropped() -> None:
    text = speakable_text("One sentence here. " * 400 + "\x1b[31mred")
    assert len(text) < 2_100 and text.endswith("(The rest is on screen.)")
    assert "\x1b" not in speakable_text("\x1b[31mred\x07")


@pytest.fixture
def espeak() -> str:
    program = find_tts()
    if program is None:
        if os.environ.get("CI"):
            pytest.fail("espeak-ng is missing: scripts/test installs it (apt-get install espeak-ng)")
        pytest.skip("espeak-ng is not installed (scripts/test installs it)")
    return program


async def test_a_reply_is_synthesized_to_a_wav_with_real_speech(espeak: str, tmp_path: Path) -> None:
    path = await Voice(program=espeak).synthesize(REPLY, tmp_path / "reply.wav")
    with wave.open(str(path)) as audio:
        seconds = audio.getnframes() / audio.getframerate()
        assert audio.getsampwidth() == 2
        samples = array.array("h", audio.readframes(audio.getnframes()))
    # about 40 words at 175 a minute: well over a few seconds, not minutes (code is not spelled out)
    assert 6 < seconds < 40, seconds
    loud = sum(1 for sample in samples if abs(sample) > 1000)
    assert loud / len(samples) > 0.1, "most of the audio is silence"
    assert max(abs(sample) for sample in samples) > 8000


async def test_faster_speech_is_shorter(espeak: str, tmp_path: Path) -> None:
    slow = await Voice(program=espeak, rate=120).synthesize("Your call with Sam starts soon.", tmp_path / "a.wav")
    fast = await Voice(program=espeak, rate=300).synthesize("Your call with Sam starts soon.", tmp_path / "b.wav")
    with wave.open(str(slow)) as a, wave.open(str(fast)) as b:
        assert a.getnframes() > 1.5 * b.getnframes()


async def until(condition: Callable[[], bool], seconds: float = 10) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


@pytest.fixture
def slow_tts(tmp_path: Path) -> tuple[str, Path]:
    """A stand-in TTS program that takes 30 s to "say" anything, to test interrupting (not speech)."""
    heard = tmp_path / "heard"
    heard.mkdir()
    program = tmp_path / "slow-tts"
    program.write_text(f'#!/bin/sh\ncat > "{heard}/$$.txt"\nexec sleep 30\n')
    program.chmod(0o755)
    return str(program), heard


async def test_speaking_returns_at_once_and_a_new_reply_or_stop_interrupts_it(slow_tts: tuple[str, Path]) -> None:
    program, heard = slow_tts
    voice = Voice(program=program, enabled=True)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await voice.speak("The first reply.")
    assert loop.time() - started < 5 and voice.speaking
    first = voice._speaking
    await until(lambda: len(list(heard.iterdir())) == 1 and "reply" in next(heard.iterdir()).read_text())
    await voice.speak("The second reply.")
    assert first is not None and first.returncode is not None, "the first reply was interrupted"
    assert voice.speaking
    await until(lambda: len(list(heard.iterdir())) == 2 and all(p.read_text() for p in heard.iterdir()))
    await voice.stop()
    assert not voice.speaking and voice.last_error is None
    spoken = sorted(path.read_text() for path in heard.iterdir())
    assert spoken == ["The first reply.", "The second reply."]


async def test_voice_off_says_nothing_and_no_engine_says_what_to_install(slow_tts: tuple[str, Path]) -> None:
    program, heard = slow_tts
    voice = Voice(program=program, enabled=False)
    await voice.speak("Hello.")
    assert not voice.speaking and list(heard.iterdir()) == []
    missing = Voice(program=None)
    missing.program = None
    assert not missing.available and "apt install espeak-ng" in missing.describe()
    with pytest.raises(UserError, match="apt install espeak-ng"):
        await missing.synthesize("Hello.", Path("never.wav"))
    with pytest.raises(UserError, match="80-450"):
        Voice(rate=5)
