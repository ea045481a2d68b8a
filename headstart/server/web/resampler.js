// Streaming windowed-sinc resampler for mono float32 audio, used inside the AudioWorklets (the
// microphone at the device rate -> 16 kHz; the reply voice at its announced rate -> the device rate).
//
// Band-limited interpolation (Smith, "Digital Audio Resampling", CCRMA): each output sample is the
// input convolved with a Blackman-windowed sinc whose cutoff is 0.45 x the lower of the two rates,
// so downsampling does not alias. The kernel is tabulated at `phases` fractional offsets (nearest
// phase is used), so no trig runs per sample.

export class Resampler {
  /**
   * @param {number} inRate input rate, Hz
   * @param {number} outRate output rate, Hz
   * @param {number} zeroCrossings sinc zero crossings on each side (quality vs. cost)
   * @param {number} phases fractional offsets tabulated
   */
  constructor(inRate, outRate, zeroCrossings = 10, phases = 256) {
    if (!(inRate > 0 && outRate > 0)) throw new RangeError(`bad rates ${inRate} -> ${outRate}`);
    this.inRate = inRate;
    this.outRate = outRate;
    this.passthrough = inRate === outRate;
    this.step = inRate / outRate; // input samples per output sample
    const cutoff = (0.45 * Math.min(inRate, outRate)) / inRate; // cycles per input sample
    this.half = Math.ceil(zeroCrossings / (2 * cutoff)); // kernel half-width, input samples
    this.taps = 2 * this.half;
    this.phases = phases;
    this.table = new Float32Array((phases + 1) * this.taps);
    for (let p = 0; p <= phases; p++) {
      for (let j = 0; j < this.taps; j++) {
        // tap j weighs input base - half + 1 + j for an output at base + p/phases
        const d = p / phases + this.half - 1 - j;
        if (Math.abs(d) >= this.half) continue;
        const x = 2 * cutoff * d;
        const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
        const w = 0.42 + 0.5 * Math.cos((Math.PI * d) / this.half) + 0.08 * Math.cos((2 * Math.PI * d) / this.half);
        this.table[p * this.taps + j] = 2 * cutoff * sinc * w;
      }
    }
    this.reset();
  }

  /** Forget buffered input (after a flush). */
  reset() {
    this.buf = new Float32Array(this.taps + 8192);
    this.len = this.half - 1; // leading zeros: the first output lands on the first input sample
    this.pos = this.half - 1;
  }

  /**
   * Push input samples, get the output samples they complete (the rest waits for more input).
   * @param {Float32Array} input
   * @returns {Float32Array}
   */
  push(input) {
    if (this.passthrough) return input.slice();
    if (this.len + input.length > this.buf.length) {
      const grown = new Float32Array(2 * (this.len + input.length));
      grown.set(this.buf.subarray(0, this.len));
      this.buf = grown;
    }
    this.buf.set(input, this.len);
    this.len += input.length;
    const out = new Float32Array(Math.max(0, Math.ceil((this.len - this.pos) / this.step) + 1));
    const { buf, table, taps, half, phases, step } = this;
    let t = this.pos;
    let n = 0;
    for (;;) {
      const base = Math.floor(t);
      if (base + half >= this.len) break;
      const row = Math.round((t - base) * phases) * taps;
      const start = base - half + 1;
      let acc = 0;
      for (let j = 0; j < taps; j++) acc += buf[start + j] * table[row + j];
      out[n++] = acc;
      t += step;
    }
    const keepFrom = Math.floor(t) - half + 1; // the oldest input still needed
    if (keepFrom > 0) {
      buf.copyWithin(0, keepFrom, this.len);
      this.len -= keepFrom;
      t -= keepFrom;
    }
    this.pos = t;
    return out.subarray(0, n);
  }

  /** The output still held back by the kernel's look-ahead (call once at the end of a stream). */
  drain() {
    return this.passthrough ? new Float32Array(0) : this.push(new Float32Array(this.half + 1));
  }
}
