// The headstart demo page: microphone -> /ws (16 kHz PCM16, 20 ms frames), reply voice <- /ws played
// through an AudioWorklet ring buffer, transcripts, reply text, agent state and per-turn latency.
// Wire format: README.md "Protocol". No build step: this file is served as it is.
//
// For tests and the curious, `window.headstart` exposes the live state and counters (`stats`).

const FRAME_SAMPLES = 320; // 20 ms at 16 kHz
const POSITION_EVERY_MS = 100; // playback.position while playing (README: every ~100 ms)
const BACKOFF_MS = [500, 1000, 2000, 4000, 8000];
const MAX_BUFFERED_BYTES = 256 * 1024; // a stalled socket: drop mic frames rather than queue them
const HISTORY_ROWS = 6;
const EARLY_FRAMES = 75; // 1.5 s of speech captured before the first session is ready

const $ = (id) => document.getElementById(id);
const ui = {
  start: $('start'), talk: $('talk'), talkHelp: $('talk-help'), mute: $('mute'), stopReply: $('stop-reply'),
  reset: $('reset'), level: $('level'), connection: $('connection'), agent: $('agent'), agentLabel: $('agent-label'),
  alert: $('alert'), log: $('log'), empty: $('empty'), announce: $('announce'), timeline: $('timeline'),
  history: $('history'),
  figures: { v2v: $('m-v2v'), serverV2v: $('m-server-v2v'), ttft: $('m-ttft'), ttfa: $('m-ttfa'), tpot: $('m-tpot'),
    eot: $('m-eot') },
};

const stats = {
  framesCaptured: 0, framesSent: 0, framesDropped: 0, samplesSent: 0, audioBytesReceived: 0, playedSamples: 0, playedMs: 0,
  playbackDropped: 0, repliesStarted: 0, repliesPlayed: 0, turns: 0, connects: 0, reconnects: 0, errors: [],
  toolCalls: 0, toolResults: 0, timersFired: 0, announcements: 0,
};
const state = {
  running: false, // the user pressed Start
  mode: 'handsfree', // or 'ptt'
  muted: false,
  talking: false, // push-to-talk held
  connection: 'idle', // idle | connecting | open | reconnecting | closed
  agent: 'idle', // idle | listening | thinking | speaking
  userSpeaking: false,
  sessionStarted: false,
  outputRate: null,
  audioReplyId: null, // the reply whose binary frames are arriving
  playingReplyId: null,
  pausedReplyId: null,
  finishedReplies: new Set(), // reply.done or reply.interrupted seen
  lastMetrics: null,
};
const events = []; // the last server event types (for debugging and tests)
const agentStates = []; // every change of the agent's state
window.headstart = { state, stats, events, agentStates, metrics: [],
  // Feed the page a server message as if it came over the socket (a JSON event object or an
  // ArrayBuffer of reply PCM16): for tests and debugging.
  dispatch: (message) => (message instanceof ArrayBuffer ? onReplyAudio(message) : onEvent(message)),
};

let ws = null;
let audio = null; // {ctx, stream, source, capture, playback}
let attempt = 0;
let reconnectTimer = null;
let lastPositionSentAt = 0;
let sendAnchors = []; // [samplesSentAfterFrame, performance.now()] for mapping audio_ms -> local time
let earlyFrames = []; // mic frames captured before the first session started
let awaitingFirstSession = false; // Start was pressed and no session has started since
let turn = newTurn(); // what this page measured of the turn in progress
const turnsByReply = new Map();
let userEntry = null; // the <li> of the user's utterance in progress
const agentEntries = new Map(); // reply id -> {li, textEl, text}
const toolEntries = new Map(); // call id -> {li, result}
const announcedReplies = new Set(); // agent-initiated replies (a timer fired): no user turn before them

function newTurn() {
  return { speechEndLocal: null, vadStoppedReceived: null, commitAt: null, heardAt: null };
}

// -- messages and state ------------------------------------------------------------------------------

function showAlert(text) {
  ui.alert.textContent = text;
  ui.alert.hidden = !text;
}

function setConnection(name, label) {
  state.connection = name;
  ui.connection.dataset.state = name;
  ui.connection.textContent = label;
}

function setAgent(name) {
  if (name !== state.agent) agentStates.push(name);
  state.agent = name;
  ui.agent.dataset.state = name;
  const labels = { idle: 'Idle', listening: 'Listening', thinking: 'Thinking', speaking: 'Speaking' };
  let label = labels[name] || name;
  if (name === 'listening' && state.userSpeaking) label = 'Listening — hearing you';
  if (name === 'speaking' && state.pausedReplyId) label = 'Speaking — paused';
  ui.agentLabel.textContent = label;
  ui.agent.dataset.user = state.userSpeaking ? 'speaking' : 'quiet';
  ui.stopReply.disabled = !(name === 'speaking' || name === 'thinking');
}

function announce(text) {
  ui.announce.textContent = text;
}

// -- the websocket ------------------------------------------------------------------------------------

function wsUrl() {
  const url = new URL('ws', location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const token = new URLSearchParams(location.search).get('token');
  url.search = token ? `?token=${encodeURIComponent(token)}` : '';
  return url.href;
}

function send(obj) {
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(obj));
}

function connect() {
  clearTimeout(reconnectTimer);
  setConnection(attempt ? 'reconnecting' : 'connecting', attempt ? `Reconnecting (try ${attempt + 1})…` : 'Connecting…');
  const socket = new WebSocket(wsUrl());
  socket.binaryType = 'arraybuffer';
  ws = socket;
  socket.onopen = () => {
    send({ type: 'session.start', sample_rate: 16000, format: 'pcm16' });
  };
  socket.onmessage = (e) => {
    if (socket !== ws) return;
    if (typeof e.data !== 'string') return onReplyAudio(e.data);
    let event;
    try {
      event = JSON.parse(e.data);
    } catch (err) {
      console.warn('headstart: a text frame that is not JSON was ignored', err);
      return undefined;
    }
    return onEvent(event);
  };
  socket.onclose = (e) => {
    if (socket !== ws) return;
    ws = null;
    onDisconnected(e);
  };
}

function onDisconnected(e) {
  const wasStarted = state.sessionStarted;
  state.sessionStarted = false;
  flushPlayback();
  closeOpenEntries();
  if (!state.running) {
    setConnection('idle', 'Not connected');
    setAgent('idle');
    return;
  }
  setAgent('idle');
  const delay = BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)] * (0.8 + 0.4 * Math.random());
  attempt += 1;
  const why = e.code === 1013 ? 'The server is full.' : e.code === 1000 ? 'The server ended the session.'
    : e.code === 1001 ? 'The server shut down (it may be restarting).'
    : wasStarted ? 'The connection to the server was lost.' : 'The server cannot be reached.';
  showAlert(`${why} Reconnecting in ${(delay / 1000).toFixed(1)} s (attempt ${attempt})…`);
  setConnection('reconnecting', 'Reconnecting…');
  reconnectTimer = setTimeout(() => {
    stats.reconnects += 1;
    connect();
  }, delay);
}

function onEvent(ev) {
  events.push(ev.type);
  if (events.length > 500) events.splice(0, events.length - 500);
  switch (ev.type) {
    case 'session.started':
      attempt = 0;
      stats.connects += 1;
      state.sessionStarted = true;
      state.outputRate = ev.output && ev.output.sample_rate;
      stats.samplesSent = 0;
      sendAnchors = [];
      showAlert('');
      setConnection('open', 'Connected');
      setAgent('listening');
      for (const b of [ui.mute, ui.reset]) b.disabled = false;
      awaitingFirstSession = false;
      for (const pcm of earlyFrames.splice(0)) sendFrame(pcm);
      break;
    case 'vad.speech_started':
      state.userSpeaking = true;
      setAgent(state.agent);
      break;
    case 'vad.speech_stopped':
      state.userSpeaking = false;
      turn.speechEndLocal = localTimeOfAudio(ev.audio_ms);
      turn.vadStoppedReceived = performance.now();
      setAgent(state.agent);
      break;
    case 'transcript.partial':
      showPartial(ev);
      break;
    case 'transcript.final':
      showFinal(ev.text);
      break;
    case 'turn.end':
      setAgent('thinking');
      break;
    case 'reply.started':
      stats.repliesStarted += 1;
      if (ev.transcript) {
        turnsByReply.set(ev.reply_id, turn);
        turn = newTurn();
      } else {
        announcedReplies.add(ev.reply_id); // the user's turn in progress (if any) is not this reply's
      }
      startAgentEntry(ev.reply_id);
      setAgent('thinking');
      break;
    case 'tool.call':
      stats.toolCalls += 1;
      showToolCall(ev);
      break;
    case 'tool.result':
      stats.toolResults += 1;
      showToolResult(ev);
      break;
    case 'timer.fired':
      stats.timersFired += 1;
      showTimerFired(ev);
      break;
    case 'reply.text.delta':
      appendAgentText(ev.reply_id, ev.text);
      break;
    case 'reply.audio.start':
      state.audioReplyId = ev.reply_id;
      audio && audio.playback.port.postMessage({ type: 'start', replyId: ev.reply_id, rate: ev.sample_rate });
      break;
    case 'reply.paused':
      state.pausedReplyId = ev.reply_id;
      audio && audio.playback.port.postMessage({ type: 'pause' });
      setAgent(state.agent);
      break;
    case 'reply.resumed':
      state.pausedReplyId = null;
      audio && audio.playback.port.postMessage({ type: 'resume' });
      setAgent(state.agent);
      break;
    case 'reply.interrupted':
      state.finishedReplies.add(ev.reply_id);
      state.pausedReplyId = null;
      if (state.audioReplyId === ev.reply_id) state.audioReplyId = null;
      flushPlayback();
      markInterrupted(ev.reply_id, ev.heard_text);
      setAgent('listening');
      break;
    case 'reply.done':
      state.finishedReplies.add(ev.reply_id);
      finishAgentEntry(ev.reply_id, ev.text);
      if (audio) audio.playback.port.postMessage({ type: 'end', replyId: ev.reply_id });
      if (state.audioReplyId === ev.reply_id) state.audioReplyId = null;
      if (!audio || state.playingReplyId !== ev.reply_id) maybeBackToListening();
      break;
    case 'metrics.turn':
      onMetrics(ev);
      break;
    case 'session.ending':
      showAlert('The server is shutting down: the reply in progress finishes, then it reconnects.');
      break;
    case 'error':
      stats.errors.push(ev.code);
      if (ev.code === 'busy') showAlert('The server is busy (too many sessions). Try again later.');
      // a failed tool is shown on its own line (tool.result) and answered with a spoken apology
      else if (ev.code !== 'rate_limited' && ev.code !== 'tool_failed') showAlert(`Server error (${ev.code}): ${ev.message}`);
      break;
    default:
      break;
  }
}

function maybeBackToListening() {
  if (state.agent !== 'speaking' || !state.playingReplyId) setAgent(state.sessionStarted ? 'listening' : 'idle');
}

// -- microphone and playback --------------------------------------------------------------------------

function micErrorMessage(err) {
  const name = err && err.name;
  if (name === 'NotAllowedError' || name === 'SecurityError') {
    return 'Microphone access was denied. Allow the microphone for this page (the icon in the address bar), then press Start talking again.';
  }
  if (name === 'NotFoundError' || name === 'OverconstrainedError') return 'No microphone was found. Connect one and press Start talking again.';
  if (name === 'LoadError') return `The page's audio processors could not be loaded: ${err.message}. Reload the page.`;
  if (name === 'NotReadableError') return 'The microphone is in use by another program or cannot be opened.';
  return `The microphone could not be opened: ${err && err.message ? err.message : err}`;
}

async function startAudio(ctx) {
  if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
    throw Object.assign(new Error('this page needs a secure context (https or localhost) for the microphone'),
      { name: 'SecurityError' });
  }
  const stream = await navigator.mediaDevices.getUserMedia({
    audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
  });
  try {
    await ctx.audioWorklet.addModule('capture-worklet.js');
    await ctx.audioWorklet.addModule('playback-worklet.js');
  } catch (err) {
    for (const track of stream.getTracks()) track.stop();
    throw Object.assign(new Error(`the audio processors could not be loaded (${err.message})`), { name: 'LoadError' });
  }
  const source = ctx.createMediaStreamSource(stream);
  const capture = new AudioWorkletNode(ctx, 'headstart-capture', { numberOfInputs: 1, numberOfOutputs: 0 });
  const playback = new AudioWorkletNode(ctx, 'headstart-playback', { numberOfInputs: 0, numberOfOutputs: 1,
    outputChannelCount: [1] });
  source.connect(capture);
  playback.connect(ctx.destination);
  capture.port.onmessage = (e) => onMicFrame(e.data);
  playback.port.onmessage = (e) => onPlaybackMessage(e.data);
  for (const track of stream.getAudioTracks()) {
    track.enabled = !state.muted;
    track.onended = () => {
      if (state.running) showAlert('The microphone stopped (unplugged or taken away). Press Start talking again.');
    };
  }
  return { ctx, stream, source, capture, playback };
}

function onMicFrame(msg) {
  if (msg.type !== 'frame') return;
  stats.framesCaptured += 1;
  ui.level.style.width = `${Math.min(100, Math.sqrt(msg.level) * 220)}%`;
  const sending = state.mode === 'handsfree' || state.talking;
  if (!sending) return;
  if (!state.sessionStarted) {
    // Speech right after Start (while the session opens) is kept, up to EARLY_FRAMES, and sent once
    // the session has started.
    if (awaitingFirstSession) {
      earlyFrames.push(msg.pcm);
      if (earlyFrames.length > EARLY_FRAMES) earlyFrames.shift();
    }
    return;
  }
  sendFrame(msg.pcm);
}

function sendFrame(pcm) {
  if (!ws || ws.readyState !== WebSocket.OPEN) return;
  if (ws.bufferedAmount > MAX_BUFFERED_BYTES) {
    stats.framesDropped += 1;
    return;
  }
  ws.send(pcm);
  stats.framesSent += 1;
  stats.samplesSent += FRAME_SAMPLES;
  sendAnchors.push([stats.samplesSent, performance.now()]);
  if (sendAnchors.length > 3000) sendAnchors.splice(0, 1000);
}

/** The local time (performance.now() ms) at which the user's audio at `audioMs` was sent. */
function localTimeOfAudio(audioMs) {
  if (audioMs == null || sendAnchors.length === 0) return performance.now();
  const sample = audioMs * 16;
  for (const [samples, at] of sendAnchors) {
    if (samples >= sample) return at - ((samples - sample) / 16);
  }
  const [samples, at] = sendAnchors[sendAnchors.length - 1];
  return at - ((samples - sample) / 16);
}

function onReplyAudio(buffer) {
  stats.audioBytesReceived += buffer.byteLength;
  const id = state.audioReplyId;
  if (!audio || !id || state.finishedReplies.has(id)) return;
  audio.playback.port.postMessage({ type: 'audio', replyId: id, pcm: buffer }, [buffer]);
}

function contextTimeToLocal(contextTime) {
  const ctx = audio && audio.ctx;
  if (ctx && ctx.getOutputTimestamp) {
    const ts = ctx.getOutputTimestamp();
    if (ts.performanceTime) return ts.performanceTime + (contextTime - ts.contextTime) * 1000;
  }
  return performance.now();
}

function onPlaybackMessage(msg) {
  switch (msg.type) {
    case 'position': {
      stats.playedSamples = msg.totalPlayed;
      stats.playbackDropped = msg.dropped;
      if (msg.replyId && !msg.paused) {
        stats.playedMs = msg.playedMs;
        const now = performance.now();
        if (now - lastPositionSentAt >= POSITION_EVERY_MS - 10) {
          lastPositionSentAt = now;
          send({ type: 'playback.position', reply_id: msg.replyId, position_ms: round1(msg.playedMs) });
        }
      }
      break;
    }
    case 'started': {
      state.playingReplyId = msg.replyId;
      const t = turnsByReply.get(msg.replyId);
      if (t && t.heardAt == null) t.heardAt = contextTimeToLocal(msg.contextTime);
      setAgent('speaking');
      break;
    }
    case 'drained':
      stats.playedSamples = msg.totalPlayed;
      send({ type: 'playback.position', reply_id: msg.replyId, position_ms: round1(msg.playedMs) });
      stats.repliesPlayed += 1;
      if (state.playingReplyId === msg.replyId) state.playingReplyId = null;
      setAgent(state.sessionStarted ? 'listening' : 'idle');
      break;
    case 'flushed':
      // README: on reply.interrupted flush and report how much was played. The counter is exact here:
      // position reports come only every 50 ms.
      stats.playedSamples = msg.totalPlayed;
      send({ type: 'playback.position', reply_id: msg.replyId, position_ms: round1(msg.playedMs) });
      if (state.playingReplyId === msg.replyId) state.playingReplyId = null;
      break;
    default:
      break;
  }
}

function flushPlayback() {
  state.audioReplyId = null;
  state.pausedReplyId = null;
  if (audio) audio.playback.port.postMessage({ type: 'flush' });
}

const round1 = (x) => Math.round(x * 10) / 10;

// -- transcript and reply text ------------------------------------------------------------------------

function addEntry(kind, label) {
  ui.empty.hidden = true;
  const li = document.createElement('li');
  li.className = kind;
  const who = document.createElement('span');
  who.className = 'who';
  who.textContent = label;
  const body = document.createElement('span');
  body.className = 'body';
  li.append(who, body);
  ui.log.append(li);
  ui.log.scrollTop = ui.log.scrollHeight;
  return { li, body };
}

function showPartial(ev) {
  if (!userEntry) userEntry = addEntry('user partial', 'You');
  const committed = document.createElement('span');
  committed.className = 'committed';
  committed.textContent = ev.committed || '';
  const pending = document.createElement('span');
  pending.className = 'pending';
  pending.textContent = (ev.committed && ev.pending ? ' ' : '') + (ev.pending || '');
  userEntry.body.replaceChildren(committed, pending);
}

function showFinal(text) {
  if (!text) { // no words: no turn
    if (userEntry) userEntry.li.remove();
    userEntry = null;
    if (!ui.log.children.length) ui.empty.hidden = false;
    return;
  }
  if (!userEntry) userEntry = addEntry('user', 'You');
  userEntry.li.classList.remove('partial');
  userEntry.body.textContent = text;
  userEntry.li.dataset.final = 'true';
  announce(`You said: ${text}`);
  userEntry = null;
}

function closeOpenEntries() {
  if (userEntry && !userEntry.li.dataset.final) userEntry.li.remove();
  userEntry = null;
}

function startAgentEntry(replyId) {
  const { li, body } = addEntry('agent', 'headstart');
  li.dataset.replyId = replyId;
  agentEntries.set(replyId, { li, body, text: '' });
}

function appendAgentText(replyId, text) {
  const entry = agentEntries.get(replyId);
  if (!entry) return;
  entry.text += text;
  entry.body.textContent = entry.text;
  ui.log.scrollTop = ui.log.scrollHeight;
}

function finishAgentEntry(replyId, text) {
  const entry = agentEntries.get(replyId);
  if (!entry) return;
  if (typeof text === 'string' && text) entry.text = text;
  entry.body.textContent = entry.text;
  announce(`headstart: ${entry.text}`);
}

// -- tools and timers ---------------------------------------------------------------------------------

const TOOL_ICONS = [ // by the start of the tool's name; the last one for any other
  ['timer', '⏱'], ['alarm', '⏰'], ['get_time', '🕒'], ['get_date', '📅'], ['list', '📝'], ['calculate', '🧮'],
  ['convert', '📏'], ['', '🔧'],
];
const MAX_RESULT_CHARS = 120;

function toolIcon(name) {
  return TOOL_ICONS.find(([prefix]) => String(name).startsWith(prefix))[1];
}

/** "timer_start {seconds: 60}", "get_time": the call as a reader takes it in at a glance. */
function toolCallText(name, args) {
  const parts = Object.entries(args || {}).map(([k, v]) => `${k}: ${JSON.stringify(v)}`);
  return parts.length ? `${name} {${parts.join(', ')}}` : String(name);
}

function shortText(value) {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > MAX_RESULT_CHARS ? `${text.slice(0, MAX_RESULT_CHARS - 1)}…` : text;
}

/** A small line under the user's turn (before the reply it serves): the call, then its result. */
function showToolCall(ev) {
  ui.empty.hidden = true;
  const li = document.createElement('li');
  li.className = 'tool';
  li.dataset.callId = ev.call_id;
  li.dataset.replyId = ev.reply_id;
  li.dataset.state = 'running';
  const icon = document.createElement('span');
  icon.className = 'icon';
  icon.setAttribute('aria-hidden', 'true');
  icon.textContent = toolIcon(ev.name);
  const call = document.createElement('code');
  call.className = 'call';
  call.textContent = toolCallText(ev.name, ev.arguments);
  const result = document.createElement('span');
  result.className = 'result';
  result.textContent = ' …';
  li.append(icon, ' ', call, result);
  const reply = agentEntries.get(ev.reply_id);
  if (reply && reply.li.parentNode === ui.log) ui.log.insertBefore(li, reply.li);
  else ui.log.append(li);
  ui.log.scrollTop = ui.log.scrollHeight;
  toolEntries.set(ev.call_id, { li, result });
}

function showToolResult(ev) {
  const entry = toolEntries.get(ev.call_id);
  if (!entry) return;
  entry.li.dataset.state = ev.ok ? 'ok' : 'failed';
  entry.result.textContent = ev.ok ? ` → ${shortText(ev.result ?? 'done')}` : ` ✗ ${shortText(ev.error || 'failed')}`;
  if (ev.duration_ms != null) entry.li.title = `${ev.name} took ${Math.round(ev.duration_ms)} ms`;
}

/** A timer, alarm or reminder went off: a line of its own; its spoken announcement follows as a reply. */
function showTimerFired(ev) {
  ui.empty.hidden = true;
  const li = document.createElement('li');
  li.className = 'timer';
  li.dataset.timerId = String(ev.timer_id);
  if (ev.kind === 'reminder') {
    li.textContent = `🔔 Reminder${ev.label ? `: ${ev.label}` : ''}`;
  } else {
    const what = ev.kind === 'alarm' ? `Alarm (${ev.label})` : `${ev.name || ev.label} timer`;
    li.textContent = `${ev.kind === 'alarm' ? '⏰' : '⏱'} ${what.charAt(0).toUpperCase()}${what.slice(1)} went off`;
  }
  ui.log.append(li);
  ui.log.scrollTop = ui.log.scrollHeight;
  announce(ev.text || li.textContent);
}

function markInterrupted(replyId, heard) {
  const entry = agentEntries.get(replyId);
  if (!entry) return;
  const full = entry.text;
  const heardText = heard || '';
  const heardPart = document.createElement('span');
  const rest = document.createElement('span');
  rest.className = 'unheard';
  if (full.startsWith(heardText)) {
    heardPart.textContent = heardText;
    rest.textContent = full.slice(heardText.length);
  } else {
    heardPart.textContent = full;
  }
  const note = document.createElement('span');
  note.className = 'note';
  note.textContent = 'interrupted';
  entry.body.replaceChildren(heardPart, rest, note);
  entry.li.dataset.interrupted = 'true';
}

// -- latency ------------------------------------------------------------------------------------------

const fmt = (ms) => (ms == null || !Number.isFinite(ms) ? '—' : `${Math.round(ms)} ms`);

function onMetrics(m) {
  if (announcedReplies.has(m.reply_id)) { // an announcement: no user turn, no latency to show
    stats.announcements += 1;
    if (state.agent === 'thinking' && !state.playingReplyId) setAgent('listening');
    return;
  }
  stats.turns += 1;
  const t = turnsByReply.get(m.reply_id) || newTurn();
  // Zero of this page's timeline: the end of the user's speech, as the VAD placed it in the audio
  // (mapped to when this page sent that audio), or the push-to-talk release.
  const zero = t.speechEndLocal ?? t.commitAt;
  const vadDelay = zero != null && t.vadStoppedReceived != null ? Math.max(0, t.vadStoppedReceived - zero) : 0;
  const heard = zero != null && t.heardAt != null ? t.heardAt - zero : null;
  const serverV2v = m.voice_to_voice_ms ?? m.vad_end_to_first_audio_ms;
  const row = { reply_id: m.reply_id, heard_v2v_ms: heard, server_v2v_ms: serverV2v, vad_delay_ms: vadDelay,
    ttft_ms: m.ttft_ms, tts_ttfa_ms: m.tts_ttfa_ms, tpot_ms: m.tpot_ms, metrics: m };
  window.headstart.metrics.push(row);
  state.lastMetrics = row;
  ui.figures.v2v.textContent = fmt(heard ?? serverV2v);
  ui.figures.serverV2v.textContent = fmt(serverV2v);
  ui.figures.ttft.textContent = fmt(m.ttft_ms);
  ui.figures.ttfa.textContent = fmt(m.tts_ttfa_ms);
  ui.figures.tpot.textContent = fmt(m.tpot_ms);
  ui.figures.eot.textContent = fmt(m.vad_end_to_turn_end_ms);
  drawTimeline(m, vadDelay, heard);
  for (const [id, hidden] of [['timeline-figure', false], ['history-table', false], ['latency-empty', true]]) {
    $(id).hidden = hidden;
  }
  const tr = document.createElement('tr');
  for (const value of [`#${stats.turns}${m.interrupted ? ' (interrupted)' : ''}`, fmt(heard ?? serverV2v),
    fmt(m.ttft_ms), fmt(m.tts_ttfa_ms)]) {
    const td = document.createElement('td');
    td.textContent = value;
    tr.append(td);
  }
  ui.history.prepend(tr);
  while (ui.history.children.length > HISTORY_ROWS) ui.history.lastChild.remove();
  if (state.agent === 'thinking' && !state.playingReplyId) setAgent('listening');
}

const SVG_NS = 'http://www.w3.org/2000/svg';
function svg(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text != null) el.textContent = text;
  return el;
}

/** The turn as bars on one time axis, in ms from the end of the user's speech. */
function drawTimeline(m, vadDelay, heard) {
  const at = (x) => (x == null ? null : vadDelay + x);
  const firstToken = at(m.vad_end_to_first_token_ms);
  const firstAudio = at(m.vad_end_to_first_audio_ms);
  const ttsText = firstAudio != null && m.tts_ttfa_ms != null ? firstAudio - m.tts_ttfa_ms : null;
  const lanes = [
    { label: 'VAD end', from: 0, to: vadDelay, color: '#8a8a92' },
    { label: 'ASR final', from: vadDelay, to: at(m.vad_end_to_final_ms), color: '#1c7c45' },
    { label: 'End of turn', from: vadDelay, to: at(m.vad_end_to_turn_end_ms), color: '#2e9a6a' },
    { label: 'LLM TTFT', from: firstToken != null && m.ttft_ms != null ? firstToken - m.ttft_ms : null, to: firstToken,
      color: '#a06000' },
    // tokens after the first until the chunker hands the first clause to the TTS
    { label: 'First clause', from: firstToken, to: ttsText, color: '#c98a2b' },
    { label: 'TTS first audio', from: ttsText, to: firstAudio, color: '#6a4bc4' },
    { label: 'Heard here', from: heard, to: heard, color: '#2456c9', marker: true },
  ];
  const ends = lanes.flatMap((l) => [l.from, l.to]).filter((x) => x != null && Number.isFinite(x));
  const span = Math.max(100, ...ends) * 1.08;
  const W = 480, left = 104, right = 14, top = 8, laneH = 25, axisY = top + lanes.length * laneH + 4;
  const x = (ms) => left + ((W - left - right) * ms) / span;
  const root = ui.timeline;
  root.replaceChildren();
  root.setAttribute('viewBox', `0 0 ${W} ${axisY + 22}`);
  root.append(svg('title', {}, `Turn timeline: ${lanes.filter((l) => l.to != null).map((l) =>
    `${l.label} at ${Math.round(l.to)} ms`).join(', ')}`));
  lanes.forEach((l, i) => {
    const y = top + i * laneH;
    root.append(svg('text', { x: 0, y: y + 15 }, l.label));
    if (l.to == null || !Number.isFinite(l.to)) {
      root.append(svg('text', { x: left, y: y + 15, class: 'tick' }, 'n/a'));
      return;
    }
    if (l.marker) {
      root.append(svg('path', { d: `M${x(l.to)},${y + 3} l6,8 l-6,8 l-6,-8 z`, fill: l.color }));
    } else {
      const from = l.from == null ? l.to : l.from;
      root.append(svg('rect', { x: x(from), y: y + 4, width: Math.max(2, x(l.to) - x(from)), height: 14, rx: 3,
        fill: l.color }));
    }
    // the figure right of the bar, or left of it where the bar ends near the right edge
    const label = `${Math.round(l.to)} ms`;
    const after = x(l.to) + (l.marker ? 10 : 6);
    const fits = after + 52 <= W;
    const before = x(l.from == null ? l.to : l.from) - (l.marker ? 10 : 6);
    root.append(svg('text', { x: fits ? after : before, y: y + 15, 'text-anchor': fits ? 'start' : 'end',
      class: 'tick' }, label));
  });
  root.append(svg('line', { x1: left, x2: W - right, y1: axisY, y2: axisY, class: 'axis' }));
  root.append(svg('line', { x1: x(0), x2: x(0), y1: top, y2: axisY, class: 'zero' }));
  const step = niceStep(span / 5);
  for (let v = 0; v <= span; v += step) {
    root.append(svg('line', { x1: x(v), x2: x(v), y1: axisY, y2: axisY + 4, class: 'axis' }));
    root.append(svg('text', { x: x(v), y: axisY + 16, 'text-anchor': 'middle', class: 'tick' }, `${v}`));
  }
}

function niceStep(raw) {
  const p = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// -- controls -----------------------------------------------------------------------------------------

async function start() {
  if (state.running) return stop();
  showAlert('');
  ui.start.disabled = true;
  // Created in the click handler: browsers let audio start only after a user gesture.
  const ctx = new AudioContext({ latencyHint: 'interactive' });
  awaitingFirstSession = true;
  earlyFrames = [];
  try {
    audio = await startAudio(ctx);
  } catch (err) {
    ctx.close();
    audio = null;
    awaitingFirstSession = false;
    showAlert(micErrorMessage(err));
    ui.start.disabled = false;
    return;
  }
  await ctx.resume();
  state.running = true;
  attempt = 0;
  ui.start.textContent = 'Stop';
  ui.start.disabled = false;
  ui.start.classList.remove('primary');
  connect();
}

function stop() {
  state.running = false;
  awaitingFirstSession = false;
  earlyFrames = [];
  clearTimeout(reconnectTimer);
  if (ws) {
    send({ type: 'session.end' });
    ws.close(1000);
  }
  ws = null;
  state.sessionStarted = false;
  if (audio) {
    for (const track of audio.stream.getTracks()) track.stop();
    audio.ctx.close();
    audio = null;
  }
  setConnection('idle', 'Not connected');
  setAgent('idle');
  ui.start.textContent = 'Start talking';
  ui.start.classList.add('primary');
  for (const b of [ui.mute, ui.reset, ui.stopReply]) b.disabled = true;
  ui.level.style.width = '0';
}

function setMode(mode) {
  state.mode = mode;
  const ptt = mode === 'ptt';
  ui.talk.hidden = !ptt;
  ui.talkHelp.hidden = !ptt;
  if (!ptt && state.talking) talkEnd();
}

function talkStart() {
  if (state.mode !== 'ptt' || state.talking) return;
  state.talking = true;
  ui.talk.setAttribute('aria-pressed', 'true');
  ui.talk.textContent = 'Release to send';
  if (state.playingReplyId || state.agent === 'speaking' || state.agent === 'thinking') send({ type: 'reply.interrupt' });
}

function talkEnd() {
  if (!state.talking) return;
  state.talking = false;
  ui.talk.setAttribute('aria-pressed', 'false');
  ui.talk.textContent = 'Hold to talk';
  turn.commitAt = performance.now();
  send({ type: 'input.commit' });
}

function toggleMute() {
  state.muted = !state.muted;
  ui.mute.setAttribute('aria-pressed', String(state.muted));
  ui.mute.textContent = state.muted ? 'Unmute' : 'Mute';
  // A disabled track yields silence, so the server still hears the end of an utterance.
  if (audio) for (const track of audio.stream.getAudioTracks()) track.enabled = !state.muted;
}

ui.start.addEventListener('click', start);
ui.mute.addEventListener('click', toggleMute);
ui.stopReply.addEventListener('click', () => send({ type: 'reply.interrupt' }));
ui.reset.addEventListener('click', () => {
  send({ type: 'session.reset' });
  flushPlayback();
  ui.log.replaceChildren();
  agentEntries.clear();
  toolEntries.clear();
  userEntry = null;
  ui.empty.hidden = false;
});
for (const input of document.querySelectorAll('input[name="mode"]')) {
  input.addEventListener('change', () => input.checked && setMode(input.value));
}
ui.talk.addEventListener('pointerdown', (e) => { ui.talk.setPointerCapture(e.pointerId); talkStart(); });
ui.talk.addEventListener('pointerup', talkEnd);
ui.talk.addEventListener('pointercancel', talkEnd);
ui.talk.addEventListener('lostpointercapture', talkEnd);
const isTalkKey = (e) => e.code === 'Space' || (e.key === 'Enter' && e.target === ui.talk);
document.addEventListener('keydown', (e) => {
  if (state.mode !== 'ptt' || !isTalkKey(e) || e.repeat) return;
  if (e.target !== ui.talk && (e.target.closest('button, input, select, textarea, a'))) return;
  e.preventDefault();
  talkStart();
});
document.addEventListener('keyup', (e) => {
  if (state.mode !== 'ptt' || !isTalkKey(e)) return;
  e.preventDefault();
  talkEnd();
});
window.addEventListener('blur', talkEnd); // a key released in another window never reaches us
setMode(document.querySelector('input[name="mode"]:checked').value);
