"""Who has the floor: the turn-taking policy, a plain synchronous state machine on an injected clock.

* user: listening / speaking (the VAD); agent: listening / thinking (a reply exists, no audio has left
  yet) / speaking (its audio is playing on the client, by the client's `playback_position` reports or,
  between them, by real-time estimate). A client that reports is assumed to play at most
  `unreported_max_s` past its last report: when its reports stop (a suspended AudioContext, a stalled
  tab) its playback counts as stopped there, so the reply's audio stops leaving ~1 s further on, the
  reply is not done, and an interruption keeps only what was reported heard.
* Barge-in: a VAD speech start while the agent thinks or speaks pauses the reply at once. Words from
  the ASR (not fillers like "mm-hmm", not bracketed noises like "[cough]") interrupt it; no words (the
  listener's empty final transcript, or fillers only) resume it, and that utterance is no turn; nor is
  an utterance of fillers only ("Uh?") while the agent listens. While the reply's audio
  plays, `bargein_armed` asks the VAD for its quicker barge-in start (`VADConfig.bargein_min_speech_s`):
  a pause is cheap and reversible, so it need not wait for the confirmation a turn start needs.
* Backchannels: while the reply plays, a short utterance (under `backchannel_max_s` of speech) of
  backchannel words only ("yeah", "okay", "right" and the fillers: `BACKCHANNEL_WORDS`), or a short,
  low-confidence transcript (at most two words, mean word probability under `backchannel_min_confidence`),
  is the listener keeping up, not a barge-in: the reply resumes. "Stop. What time is it?" interrupts.
  Speech times come from the listener's audio positions (`speech_started`/`speech_ended`'s `audio_s`);
  without them every utterance counts as long (no backchannel).
* Echo: a speech start the session judged to be its own voice (`headstart.session.echo`) starts no pause and
  no turn; if that utterance later yields words that are not the reply's own words (the user talked
  over the echo), it is a barge-in after all.

The session reports what happened and executes the returned `Action`s (Pause, Resume, Interrupt,
StartReply); this module does no I/O.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from headstart.clock import Clock

class UserState(enum.Enum):
    LISTENING = "listening"
    SPEAKING = "speaking"


class AgentState(enum.Enum):
    LISTENING = "listening"
    THINKING = "thinking"
    SPEAKING = "speaking"


@dataclass(frozen=True, slots=True)
class Pause:
    reply_id: str


@dataclass(frozen=True, slots=True)
class Resume:
    reply_id: str


@dataclass(frozen=True, slots=True)
class Interrupt:
    reply_id: str
    played_s: float
    reason: str


@dataclass(frozen=True, slots=True)
class StartReply:
    transcript: str


Action = Pause | Resume | Interrupt | StartReply

FILLER_WORDS = frozenset({
    "mm", "mmm", "hmm", "hm", "mhm", "mmhmm", "mmhm", "uh", "uhhuh", "uhuh", "um", "umm", "uhm", "ah", "ahh",
    "oh", "er", "erm", "eh", "huh",
})
# Words a listener says to keep the speaker going ("yeah", "okay", "I see"); with the fillers above
# (`content_words` drops those), a short utterance of only these does not interrupt the reply.
BACKCHANNEL_WORDS = frozenset({
    "yeah", "yea", "ya", "yes", "yep", "yup", "ok", "okay", "right", "alright", "sure", "cool", "wow", "nice",
    "great", "gotcha", "exactly", "true", "really", "i", "see", "got", "it",
})
_BRACKETED = re.compile(r"\[[^\]]*\]|\([^)]*\)|\*[^*]*\*")
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*'?")  # letters of any script, digits, inner apostrophes
_HUM = re.compile(r"[hm]+|(uh|um|ah|oh|er)+h*")  # "mmmm", "hmmm", "uhhh", "ahh"


def content_words(text: str) -> list[str]:
    """Lower-case words of `text` that carry content: bracketed noises ("[cough]", "(laughs)") and
    fillers/backchannels ("mm-hmm", "uh", "hmm") removed."""
    text = _BRACKETED.sub(" ", text.lower()).replace("-", "")
    words = (w.strip("'") for w in _WORD.findall(text))
    return [w for w in words if w and w not in FILLER_WORDS and not _HUM.fullmatch(w)]


def has_words(text: str) -> bool:
    """Whether `text` holds words that make a turn: not "" and not only fillers ("Uh?", "mm-hmm") or
    bracketed noises ("[cough]"). An utterance without them is no turn, as a VAD burst without words."""
    return bool(content_words(text))


_CONTRACTIONS = {"'m": "am", "'s": "is", "'re": "are", "'ll": "will", "'ve": "have", "'d": "would", "n't": "not"}


def _expand_contractions(words: list[str]) -> list[str]:
    """ "i'm" -> "i", "am"; "don't" -> "do", "not": the ASR writes either form for the same sound."""
    out: list[str] = []
    for word in words:
        for suffix, full in _CONTRACTIONS.items():
            if word.endswith(suffix) and len(word) > len(suffix):
                out += [word[: -len(suffix)], full]
                break
        else:
            out.append(word)
    return out


def is_echo_text(heard: str, reply_text: str, min_overlap: float = 0.8) -> bool:
    """True if (almost) every content word heard is a word of the reply being played: at least
    `min_overlap` of them, where a word also counts when it is a near miss of a reply word (the ASR
    mishearing the echo: "scream" for "screen", similarity >= 0.75 by difflib's ratio). One in four
    words beyond the first three may be foreign (ASR noise on a long echo), and so may the last of
    three or more when it starts like a reply word (the echo cut off mid-word, completed by the ASR into
    another word); a short utterance of foreign words ("stop", "wait a moment") is never echo."""
    import difflib

    words = _expand_contractions(content_words(heard))
    if not words:
        return True
    reply = set(_expand_contractions(content_words(reply_text)))

    def known(word: str) -> bool:
        return word in reply or bool(difflib.get_close_matches(word, reply, n=1, cutoff=0.75))

    matched = sum(known(w) for w in words)
    if matched / len(words) >= min_overlap or len(words) - matched <= (len(words) - 1) // 4:
        return True
    # the echo cut off mid-word (a mic window's end, a playback underrun): the ASR completes the cut
    # word into another that starts alike ("here to-" heard as "here today")
    last = words[-1]
    return (len(words) >= 3 and matched == len(words) - 1 and not known(last)
            and any(w[:2] == last[:2] for w in reply))


class TurnTaking:
    """Who has the floor, as a plain state machine on an injected clock (times from `clock.now()`).

    The session reports what happened (speech start/end, words, end of turn, reply audio sent,
    playback positions) and executes the `Action`s returned (Pause, Resume, Interrupt, StartReply).

    Args:
        clock: the time source (FakeClock in tests).
        max_pause_s: a paused reply resumes by itself this long after the user stopped speaking if no
            transcript decided it (a safety net: the listener always sends a final transcript).
        realtime_playback: the client plays the audio in real time from its arrival (a live client);
            False: audio counts as played once it has left (a file writer such as the demo).
        echo_tail_s: a speech start this soon after the reply finished playing may still be its echo
            (the acoustic and buffering delay, the room's tail): the echo verdict still applies.
        bargein_after_s: `bargein_armed` waits until this much of the reply has played: the echo
            detector (headstart/session/echo.py) recognises the session's own voice only once ~0.2 s of reply
            audio (40 % of its 0.5 s window) plus the acoustic delay lie in its window, and before that
            only the slower speech start gives it that audio.
        unreported_max_s: once the client has sent a playback report (in this session), the position
            runs on in real time at most this far past the reply's last report (0 for a reply not
            reported yet): reports come every ~0.1 s while playing, so 0.5 s covers late ones and a
            client that stops reporting at the very end, and a frozen client is not assumed to play on.
        backchannel_max_s: an utterance with less speech than this (seconds of audio, the VAD's speech
            start to its speech end) may be a backchannel ("yeah", "mm-hmm") that does not interrupt
            the reply; the VAD measures a spoken "Yeah." at 0.5-0.6 s and "Okay." at ~0.7 s.
        backchannel_min_confidence: a short transcript of at most two words whose mean word probability
            is below this is taken for noise the recogniser made words of, not a barge-in.
    """

    def __init__(
        self, clock: Clock, max_pause_s: float = 4.0, realtime_playback: bool = True, bargein_after_s: float = 0.4,
        echo_tail_s: float = 0.5, unreported_max_s: float = 0.5, backchannel_max_s: float = 0.8,
        backchannel_min_confidence: float = 0.5,
    ) -> None:
        if not backchannel_max_s >= 0:
            raise ValueError(f"backchannel_max_s must be >= 0, got {backchannel_max_s}")
        if not 0 <= backchannel_min_confidence <= 1:
            raise ValueError(f"backchannel_min_confidence must be in [0, 1], got {backchannel_min_confidence}")
        self.backchannel_max_s = backchannel_max_s
        self.backchannel_min_confidence = backchannel_min_confidence
        self._speech_start_s: float | None = None  # audio position where the current utterance began
        self._speech_end_s: float | None = None  # ... and where its speech (so far) ended
        if not bargein_after_s >= 0:
            raise ValueError(f"bargein_after_s must be >= 0, got {bargein_after_s}")
        if not unreported_max_s >= 0:
            raise ValueError(f"unreported_max_s must be >= 0, got {unreported_max_s}")
        self.unreported_max_s = unreported_max_s
        self._client_reports = False  # the client has reported a playback position in this session
        self._clock = clock
        self.max_pause_s = max_pause_s
        self.bargein_after_s = bargein_after_s
        self.realtime_playback = realtime_playback
        self.echo_tail_s = echo_tail_s
        self._played_out_at: float | None = None  # when the last reply finished playing
        self.user = UserState.LISTENING
        self.reply_id: str | None = None
        self.paused = False
        # the current utterance: None, "user", "barge" (paused the reply, no verdict yet), "echo",
        # "ignored" (no words, or the session's own voice): no turn
        self.utterance: str | None = None
        self._echo_sure = False  # the current utterance was the reply's echo alone at some point
        self._speech_ended_at: float | None = None
        self._reset_playback()

    def _reset_playback(self) -> None:
        self.sent_s = 0.0  # reply audio that has left the session
        self.audio_finished = False  # no more audio will come for this reply
        self._anchor_pos_s = 0.0  # playback position at _anchor_at
        self._anchor_at: float | None = None  # None until the first audio left
        self._reported_s = 0.0  # the client's last reported position of this reply

    # -- agent side -------------------------------------------------------------------------------
    @property
    def agent(self) -> AgentState:
        if self.reply_id is None:
            return AgentState.LISTENING
        if self._anchor_at is None:
            return AgentState.THINKING
        if self.audio_finished and self.played_s() >= self.sent_s - 1e-6:
            self.reply_id = None  # the client has played it all
            now = self._clock.now()
            self._played_out_at = now  # the moment its last sample played, not when this was asked
            if self.realtime_playback and not self.paused and self._anchor_at is not None:
                self._played_out_at = min(now, self._anchor_at + self.sent_s - self._anchor_pos_s)
            self._reset_playback()
            return AgentState.LISTENING
        return AgentState.SPEAKING

    def reply_started(self, reply_id: str) -> None:
        self.reply_id = reply_id
        self.paused = False
        self._reset_playback()

    def audio_sent(self, duration_s: float) -> None:
        if self._anchor_at is None:
            self._anchor_at = self._clock.now()  # the client starts playing on arrival
        self.sent_s += duration_s

    def audio_done(self) -> None:
        """All of the reply's audio has left (or there was none)."""
        self.audio_finished = True
        if self._anchor_at is None:  # no audio at all: nothing will play
            self.reply_id = None
            self._reset_playback()

    def playback_position(self, reply_id: str, position_s: float) -> None:
        """The client reports having played `position_s` of reply `reply_id`'s audio."""
        if reply_id != self.reply_id or self._anchor_at is None:
            return
        self._anchor_pos_s = min(position_s, self.sent_s)
        self._anchor_at = self._clock.now()
        self._reported_s = self._anchor_pos_s
        self._client_reports = True

    def played_s(self) -> float:
        """How much of the reply's audio the client has played now (reported, then real time, frozen
        while paused, never more than was sent, nor, once the client reports, more than
        `unreported_max_s` past its last report)."""
        if self._anchor_at is None:
            return 0.0
        if not self.realtime_playback:
            return self.sent_s
        position = self._anchor_pos_s
        if not self.paused:
            position += self._clock.now() - self._anchor_at
        if self._client_reports:  # its reports stopped: so did its playback (a frozen tab)
            position = min(position, self._reported_s + self.unreported_max_s)
        return min(position, self.sent_s)

    @property
    def bargein_armed(self) -> bool:
        """Whether a speech start now would be a barge-in over audible reply audio, so the VAD may use
        its quicker barge-in start (`VAD.bargein_armed`): the agent speaks, the reply is not paused,
        and at least `bargein_after_s` of it has played. The session sets the listener's flag from it
        before each audio push."""
        return (
            self.agent is AgentState.SPEAKING
            and not self.paused
            and self.played_s() >= self.bargein_after_s
        )

    @property
    def just_spoke(self) -> bool:
        """The agent is listening, but its last reply finished playing less than `echo_tail_s` ago:
        its echo may still be on its way to the mic."""
        return (
            self.agent is AgentState.LISTENING and self._played_out_at is not None
            and self._clock.now() - self._played_out_at <= self.echo_tail_s
        )

    @property
    def awaits_echo_verdict(self) -> bool:
        """The current utterance is a possible echo or barge-in while the reply plays: the sound's
        verdict (`words`/`final`'s `echo`) applies to it."""
        return self.utterance in ("barge", "echo") and self.agent is AgentState.SPEAKING

    # -- user side --------------------------------------------------------------------------------
    def speech_started(self, echo: bool = False, audio_s: float | None = None) -> list[Action]:
        """The VAD heard speech start (at `audio_s` in the user's audio stream, if known); `echo`: the
        audio matches what is being played."""
        self.user = UserState.SPEAKING
        self._speech_ended_at = None
        if self._speech_start_s is None:  # speech that resumes before the final keeps the utterance's start
            self._speech_start_s = audio_s
        self._speech_end_s = None
        self._echo_sure = False
        agent = self.agent
        if agent is AgentState.LISTENING:
            self.utterance = "echo" if echo and self.just_spoke else "user"
            return []
        if echo and agent is AgentState.SPEAKING:
            self.utterance = "echo"
            return []
        self.utterance = "barge"
        if self.paused:
            return []
        self._pause()
        return [Pause(self.reply_id)]  # type: ignore[arg-type]

    def speech_ended(self, audio_s: float | None = None) -> None:
        """The VAD heard the speech end (at `audio_s` in the user's audio stream, if known)."""
        self.user = UserState.LISTENING
        self._speech_ended_at = self._clock.now()
        self._speech_end_s = audio_s

    def words(self, text: str, reply_text: str = "", echo: bool = False, *, confidence: float | None = None,
              audio_end_s: float | None = None) -> list[Action]:
        """A partial transcript of the current utterance, heard up to `audio_end_s` of the stream, with
        the recogniser's mean word probability `confidence`; `reply_text`: the reply being played;
        `echo`: the microphone still matches the reply closely (`EchoDetector.is_sure_echo`): the
        words are the echo's, whatever the ASR made of them (a near miss, a hallucinated tail). Words
        that may still be a backchannel wait for more speech or the final."""
        if echo and self.awaits_echo_verdict:
            self.utterance = "echo"  # a speech start misjudged as a barge-in (after an underrun gap)
            self._echo_sure = True
            return self._resume()
        if self._likely_echo(text, reply_text):
            return []
        speech_s = self._speech_s(audio_end_s)
        if self.utterance == "barge" and content_words(text) and not self._backchannel(text, speech_s, confidence):
            return self._interrupt("barge_in")
        if (self.utterance == "echo" and not is_echo_text(text, reply_text)
                and not self._backchannel(text, speech_s, confidence)):
            return self._interrupt("barge_in")  # the user talks over the echo
        return []

    def final(self, text: str, reply_text: str = "", echo: bool = False, *,
              confidence: float | None = None) -> list[Action]:
        """The final transcript of the current utterance, with the recogniser's mean word probability
        `confidence` (`echo`: as in `words`)."""
        speech_s = self._speech_s(None)
        self._speech_start_s = self._speech_end_s = None  # the utterance is over
        if (echo and self.awaits_echo_verdict) or self._likely_echo(text, reply_text):
            self.utterance = "ignored"
            return self._resume()
        if self.utterance == "barge":
            if content_words(text) and not self._backchannel(text, speech_s, confidence):
                return self._interrupt("barge_in")
            self.utterance = "ignored"  # a cough, "mm-hmm", a short "yeah": no turn, the reply goes on
            return self._resume()
        if self.utterance == "echo":
            if not is_echo_text(text, reply_text) and not self._backchannel(text, speech_s, confidence):
                return self._interrupt("barge_in")
            self.utterance = "ignored"
        elif self.utterance is None:
            self.utterance = "user"
        return []

    def _speech_s(self, heard_to_s: float | None) -> float | None:
        """Seconds of speech in the current utterance: to the VAD's speech end once it came, else to
        `heard_to_s` (a partial's audio end); None when the audio positions are unknown."""
        end = self._speech_end_s if self._speech_end_s is not None else heard_to_s
        if self._speech_start_s is None or end is None:
            return None
        return max(0.0, end - self._speech_start_s)

    def _backchannel(self, text: str, speech_s: float | None, confidence: float | None) -> bool:
        """Whether an utterance of `speech_s` seconds heard as `text` keeps the listener's place rather
        than taking the floor: short, and backchannel words only or a low-confidence word or two."""
        if speech_s is None or speech_s >= self.backchannel_max_s:
            return False
        words = content_words(text)
        if all(w in BACKCHANNEL_WORDS for w in words):
            return True
        return confidence is not None and confidence < self.backchannel_min_confidence and len(words) <= 2

    def _likely_echo(self, text: str, reply_text: str) -> bool:
        """An utterance once heard as the reply's echo alone whose words are still mostly the reply's
        (at least half: a loaded ASR transcribes it late, after the reply ended or while the mic
        window holds an underrun's silence, and mishears some of it)."""
        return self.utterance == "echo" and self._echo_sure and is_echo_text(text, reply_text, min_overlap=0.5)

    def end_of_turn(self, transcript: str) -> list[Action]:
        """The endpointer (or the client's commit) ended the user's turn."""
        kind, self.utterance = self.utterance, None
        self._speech_start_s = self._speech_end_s = None
        self.user = UserState.LISTENING
        if kind in ("ignored", "echo") or not has_words(transcript):
            return []  # no words, or a lone filler ("Uh?"): no reply
        actions: list[Action] = []
        if self.agent is not AgentState.LISTENING:
            actions += self._interrupt("new_turn")
        return [*actions, StartReply(transcript)]

    def cleared(self) -> list[Action]:
        """The client dropped the input in progress."""
        kind, self.utterance = self.utterance, None
        self._speech_start_s = self._speech_end_s = None
        self.user = UserState.LISTENING
        return self._resume() if kind == "barge" else []

    def interrupt(self, reason: str = "client") -> list[Action]:
        """Stop the current reply (the client asked, or the session resets)."""
        if self.agent is AgentState.LISTENING:
            return []
        return self._interrupt(reason)

    def poll(self) -> list[Action]:
        """Time-driven decisions: resume a reply paused for a barge-in whose verdict is late (a busy
        ASR). The utterance stays a possible barge-in: words that come later still interrupt."""
        if (
            self.paused and self.utterance == "barge" and self.user is UserState.LISTENING
            and self._speech_ended_at is not None
            and self._clock.now() - self._speech_ended_at >= self.max_pause_s
        ):
            return self._resume()
        return []

    # -- internals --------------------------------------------------------------------------------
    def _pause(self) -> None:
        if self._anchor_at is not None:
            self._anchor_pos_s = self.played_s()
            self._anchor_at = self._clock.now()
        self.paused = True

    def _resume(self) -> list[Action]:
        if not self.paused or self.reply_id is None:
            self.paused = False
            return []
        self.paused = False
        if self._anchor_at is not None:
            self._anchor_at = self._clock.now()
        return [Resume(self.reply_id)]

    def _interrupt(self, reason: str) -> list[Action]:
        if self.utterance in ("barge", "echo"):
            self.utterance = "user"  # the words make it a real turn
        if self.reply_id is None:
            self.paused = False
            return []
        action = Interrupt(self.reply_id, self.played_s(), reason)
        self.reply_id = None
        self.paused = False
        self._reset_playback()
        return [action]
