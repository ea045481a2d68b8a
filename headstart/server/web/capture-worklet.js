// Microphone capture: the device-rate input -> 16 kHz mono PCM16 frames of 20 ms (320 samples),
// posted to the page as transferable ArrayBuffers together with the frame's RMS level.
import { Resampler } from './resampler.js';

const TARGET_RATE_HZ = 16000;
const FRAME_SAMPLES = 320; // 20 ms at 16 kHz

class CaptureProcessor extends AudioWorkletProcessor {
  constructor() {
    super();
    this.resampler = new Resampler(sampleRate, TARGET_RATE_HZ);
    this.frame = new Int16Array(FRAME_SAMPLES);
    this.filled = 0;
    this.sumSquares = 0;
    this.mono = new Float32Array(128);
    this.port.onmessage = (e) => {
      if (e.data && e.data.type === 'reset') {
        this.resampler.reset();
        this.filled = 0;
        this.sumSquares = 0;
      }
    };
  }

  process(inputs) {
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true; // no input connected (yet)
    let mono = channels[0];
    if (channels.length > 1) {
      if (this.mono.length !== mono.length) this.mono = new Float32Array(mono.length);
      for (let i = 0; i < mono.length; i++) {
        let s = 0;
        for (let c = 0; c < channels.length; c++) s += channels[c][i];
        this.mono[i] = s / channels.length;
      }
      mono = this.mono;
    }
    const out = this.resampler.push(mono);
    for (let i = 0; i < out.length; i++) {
      const s = Math.max(-1, Math.min(1, out[i]));
      this.sumSquares += s * s;
      this.frame[this.filled++] = Math.round(s < 0 ? s * 32768 : s * 32767);
      if (this.filled === FRAME_SAMPLES) {
        const level = Math.sqrt(this.sumSquares / FRAME_SAMPLES);
        const buffer = this.frame.buffer;
        this.port.postMessage({ type: 'frame', pcm: buffer, level }, [buffer]);
        this.frame = new Int16Array(FRAME_SAMPLES);
        this.filled = 0;
        this.sumSquares = 0;
      }
    }
    return true;
  }
}

registerProcessor('headstart-capture', CaptureProcessor);
