// Reply playback: a ring buffer of the device-rate samples of the reply voice. Each reply is a
// segment (its audio arrives as PCM16 at the rate its `reply.audio.start` announced and is resampled
// on arrival); segments play in order. The processor reports, per reply: when its first sample is
// rendered ('started', with the AudioContext time of that sample), the position played ('position',
// ~every 50 ms while playing), the end of its audio ('drained'), and on a flush what had been played
// ('flushed'). Paused: outputs silence and keeps the buffer.
import { Resampler } from './resampler.js';

const CAPACITY_S = 30; // the server keeps ~1 s ahead of the reported playback; this is plenty
const REPORT_EVERY_S = 0.05;

class PlaybackProcessor extends AudioWorkletProcessor {
  constructor() {
    super();
    this.ring = new Float32Array(Math.ceil(sampleRate * CAPACITY_S));
    this.read = 0;
    this.size = 0;
    this.segments = []; // {replyId, queued, played, ended, started, resampler}
    this.paused = false;
    this.dropped = 0; // samples that did not fit
    this.totalPlayed = 0;
    this.sinceReport = 0;
    this.port.onmessage = (e) => this.onMessage(e.data);
  }

  segment(replyId) {
    for (let i = this.segments.length - 1; i >= 0; i--) if (this.segments[i].replyId === replyId) return this.segments[i];
    return null;
  }

  write(seg, samples) {
    const cap = this.ring.length;
    const n = Math.min(samples.length, cap - this.size);
    let at = (this.read + this.size) % cap;
    for (let i = 0; i < n; i++) {
      this.ring[at] = samples[i];
      at = at + 1 === cap ? 0 : at + 1;
    }
    this.size += n;
    seg.queued += n;
    this.dropped += samples.length - n;
  }

  onMessage(m) {
    switch (m.type) {
      case 'start':
        this.segments.push({ replyId: m.replyId, queued: 0, played: 0, ended: false, started: false,
          resampler: new Resampler(m.rate, sampleRate) });
        break;
      case 'audio': {
        const seg = this.segment(m.replyId);
        if (!seg || seg.ended) break;
        const pcm = new Int16Array(m.pcm);
        const f = new Float32Array(pcm.length);
        for (let i = 0; i < pcm.length; i++) f[i] = pcm[i] / 32768;
        this.write(seg, seg.resampler.push(f));
        break;
      }
      case 'end': {
        const seg = this.segment(m.replyId);
        if (seg && !seg.ended) {
          this.write(seg, seg.resampler.drain());
          seg.ended = true;
        }
        break;
      }
      case 'pause':
        this.paused = true;
        break;
      case 'resume':
        this.paused = false;
        break;
      case 'flush':
        for (const seg of this.segments) {
          this.port.postMessage({ type: 'flushed', replyId: seg.replyId, playedMs: (1000 * seg.played) / sampleRate,
            playedSamples: seg.played, totalPlayed: this.totalPlayed });
        }
        this.segments = [];
        this.read = 0;
        this.size = 0;
        this.paused = false;
        break;
    }
  }

  process(inputs, outputs) {
    const out = outputs[0];
    const ch0 = out[0];
    const n = ch0.length;
    let i = 0;
    while (!this.paused && i < n && this.segments.length) {
      const seg = this.segments[0];
      if (seg.queued === 0) {
        if (!seg.ended) break; // underrun: more audio of this reply is coming
        this.port.postMessage({ type: 'drained', replyId: seg.replyId, playedMs: (1000 * seg.played) / sampleRate,
          playedSamples: seg.played, totalPlayed: this.totalPlayed });
        this.segments.shift();
        continue;
      }
      if (!seg.started) {
        seg.started = true;
        this.port.postMessage({ type: 'started', replyId: seg.replyId, contextTime: currentTime + i / sampleRate });
      }
      const k = Math.min(n - i, seg.queued);
      const cap = this.ring.length;
      for (let j = 0; j < k; j++) {
        ch0[i + j] = this.ring[this.read];
        this.read = this.read + 1 === cap ? 0 : this.read + 1;
      }
      seg.queued -= k;
      seg.played += k;
      this.size -= k;
      this.totalPlayed += k;
      i += k;
    }
    ch0.fill(0, i);
    for (let c = 1; c < out.length; c++) out[c].set(ch0);
    this.sinceReport += n;
    if (this.sinceReport >= REPORT_EVERY_S * sampleRate) {
      this.sinceReport = 0;
      const seg = this.segments[0];
      this.port.postMessage({ type: 'position', replyId: seg ? seg.replyId : null,
        playedMs: seg ? (1000 * seg.played) / sampleRate : 0, bufferedMs: (1000 * this.size) / sampleRate,
        totalPlayed: this.totalPlayed, dropped: this.dropped, paused: this.paused });
    }
    return true;
  }
}

registerProcessor('headstart-playback', PlaybackProcessor);
