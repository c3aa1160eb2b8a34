// AudioWorklet processors for the voice page (loaded with audioWorklet.addModule("/worklets.js")).
//
// "capture": microphone in. Collects the render quanta (128 samples) into blocks of
//   `blockSize` samples (processorOptions, default 20 ms) and posts each block to the main
//   thread as a Float32Array (transferred). It has no output.
//
// "player": reply audio out. The main thread posts {type: "push", samples: Float32Array} in
//   the server's output rate; the processor plays them in order from a ring buffer,
//   resampling linearly to the context rate (step = serverRate / contextRate). It counts
//   what it played and dropped in server samples and posts
//   {type: "progress", played, dropped, buffered} about every 50 ms while it plays, and at
//   once after a flush (with flushed: true).
//   Messages: {type: "pause"} (output silence, keep the buffer), {type: "resume"},
//   {type: "flush"} (drop what is buffered), {type: "rate", serverRate}.

class CaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const opts = (options && options.processorOptions) || {};
    this.blockSize = opts.blockSize || Math.round(sampleRate / 50);
    this.block = new Float32Array(this.blockSize);
    this.fill = 0;
  }

  process(inputs) {
    const input = inputs[0];
    if (!input || input.length === 0) return true;
    const ch = input[0];
    let i = 0;
    while (i < ch.length) {
      const n = Math.min(ch.length - i, this.blockSize - this.fill);
      this.block.set(ch.subarray(i, i + n), this.fill);
      this.fill += n;
      i += n;
      if (this.fill === this.blockSize) {
        this.port.postMessage(this.block, [this.block.buffer]);
        this.block = new Float32Array(this.blockSize);
        this.fill = 0;
      }
    }
    return true;
  }
}

class PlayerProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const opts = (options && options.processorOptions) || {};
    this.serverRate = opts.serverRate || sampleRate;
    this.step = this.serverRate / sampleRate;
    this.capacity = 1 << 16;
    this.ring = new Float32Array(this.capacity);
    this.written = 0; // server samples received (absolute index of the next write)
    this.readPos = 0; // absolute read position in server samples (fractional)
    this.dropped = 0;
    this.paused = false;
    this.lastPlayed = 0;
    this.lastDropped = 0;
    this.quanta = 0;
    this.reportEvery = Math.max(1, Math.round((0.05 * sampleRate) / 128));
    this.port.onmessage = (e) => this.onMessage(e.data);
  }

  get played() {
    return Math.min(Math.floor(this.readPos), this.written) - this.dropped;
  }

  onMessage(msg) {
    switch (msg.type) {
      case "push":
        this.push(msg.samples);
        break;
      case "pause":
        this.paused = true;
        break;
      case "resume":
        this.paused = false;
        break;
      case "flush": {
        const consumed = Math.min(Math.floor(this.readPos), this.written);
        this.dropped += this.written - consumed;
        this.readPos = this.written;
        this.report(true);
        break;
      }
      case "rate":
        this.serverRate = msg.serverRate;
        this.step = this.serverRate / sampleRate;
        break;
    }
  }

  push(samples) {
    const start = Math.floor(this.readPos);
    const live = this.written - start;
    if (live + samples.length > this.capacity) {
      let cap = this.capacity;
      while (live + samples.length > cap) cap *= 2;
      const ring = new Float32Array(cap);
      for (let k = 0; k < live; k++) ring[(start + k) % cap] = this.ring[(start + k) % this.capacity];
      this.ring = ring;
      this.capacity = cap;
    }
    for (let k = 0; k < samples.length; k++) this.ring[(this.written + k) % this.capacity] = samples[k];
    this.written += samples.length;
  }

  report(flushed) {
    const played = this.played;
    this.lastPlayed = played;
    this.lastDropped = this.dropped;
    this.port.postMessage({
      type: "progress",
      played,
      dropped: this.dropped,
      buffered: this.written - Math.min(Math.floor(this.readPos), this.written),
      paused: this.paused,
      flushed: !!flushed,
    });
  }

  process(_inputs, outputs) {
    const out = outputs[0][0];
    if (!out) return true;
    const cap = this.capacity;
    for (let k = 0; k < out.length; k++) {
      if (this.paused || this.readPos >= this.written) {
        out[k] = 0;
        continue;
      }
      const i = Math.floor(this.readPos);
      const frac = this.readPos - i;
      const a = this.ring[i % cap];
      const b = i + 1 < this.written ? this.ring[(i + 1) % cap] : a;
      out[k] = a + (b - a) * frac;
      this.readPos += this.step;
      if (this.readPos > this.written) this.readPos = this.written;
    }
    for (let c = 1; c < outputs[0].length; c++) outputs[0][c].set(out);
    this.quanta += 1;
    if (this.quanta >= this.reportEvery) {
      this.quanta = 0;
      if (this.played !== this.lastPlayed || this.dropped !== this.lastDropped) this.report(false);
    }
    return true;
  }
}

registerProcessor("capture", CaptureProcessor);
registerProcessor("player", PlayerProcessor);
