// The voice page: microphone -> /ws (PCM16), reply audio <- /ws, live transcript; or, with the
// WebRTC switch (?transport=webrtc), the microphone and the reply as RTP (Opus, the browser's own
// echo cancellation and jitter buffer) and the same events on a data channel.
// Protocol: docs/protocol.md, "Our protocol (/ws)" and "WebRTC". No dependencies, no build step.
"use strict";

(() => {
  const RATES = [8000, 16000, 22050, 24000, 32000, 44100, 48000];
  const WANTED_RATE = 24000;
  const params = new URLSearchParams(location.search);
  const $ = (id) => document.getElementById(id);

  // ---- state (window.voiceState is a read-only snapshot of it, for tests) ----
  const state = {
    status: "idle", // idle | starting | connecting | ready | closed | error
    transport: "ws", // ws | webrtc: how the audio travels
    transcripts: [], // final user texts (non-empty), in order
    tools: [], // {call_id, name, status}: the server's tool calls, in order (status null while it runs)
    assistant: [], // {response, text, heard, interrupted, done, chunks: [{text, start}]}
    events: [], // types of the JSON events received, in order
    played: 0, // reply samples played (server output-rate units)
    dropped: 0, // reply samples flushed unplayed
    received: 0, // reply samples received
    errors: [], // {code, message, fatal}
    close: null, // {code, reason} once the socket closed
    sampleRate: null, // the AudioContext's rate
    outputRate: null, // ready.output_sample_rate
  };
  Object.defineProperty(window, "voiceState", {
    configurable: false,
    enumerable: true,
    get() {
      return {
        status: state.status,
        transport: state.transport,
        transcripts: state.transcripts.slice(),
        tools: state.tools.map((t) => ({ ...t })),
        assistant: state.assistant.map((a) => ({
          response: a.response,
          text: a.text,
          heard: a.heard,
          interrupted: a.interrupted,
          done: a.done,
        })),
        events: state.events.slice(),
        played: state.played,
        dropped: state.dropped,
        received: state.received,
        errors: state.errors.map((e) => ({ ...e })),
        close: state.close && { ...state.close },
        sampleRate: state.sampleRate,
        outputRate: state.outputRate,
      };
    },
  });

  // ---- audio / connection handles ----
  let ctx = null;
  let ws = null;
  let rtc = null; // WebRTC: {pc, dc, audio}
  let stream = null;
  let source = null;
  let capture = null;
  let player = null;
  let sendRate = WANTED_RATE;
  let upsampler = null; // only when the context rate is not one the server takes
  let ready = false;
  let maxFrameBytes = 65536;
  let received = 0; // reply samples received on this connection
  let lastSent = { played: 0, dropped: 0 };
  let level = 0;
  const byResponse = new Map();
  const toolCalls = new Map(); // call_id -> its line in the log

  // ---- helpers ----
  function setStatus(s, detail) {
    state.status = s;
    const el = $("status");
    el.dataset.state = s;
    el.textContent = detail ? `${s}: ${detail}` : s;
    $("start").textContent = s === "idle" || s === "closed" || s === "error" ? "Start" : "Stop";
    $("start").setAttribute("aria-pressed", String(!(s === "idle" || s === "closed" || s === "error")));
  }

  function showError(code, message, fatal) {
    state.errors.push({ code, message, fatal: !!fatal });
    const li = document.createElement("li");
    li.textContent = `${code}${message ? `: ${message}` : ""}${fatal ? " (fatal)" : ""}`;
    $("errors").append(li);
    $("errors").hidden = false;
  }

  function send(obj) {
    if (rtc) {
      if (rtc.dc && rtc.dc.readyState === "open") rtc.dc.send(JSON.stringify(obj));
    } else if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(obj));
  }

  function scrollLog() {
    const log = $("log");
    log.scrollTop = log.scrollHeight;
  }

  // Streaming linear resampler (Float32 in, Float32 out), keeping its phase across blocks.
  class LinearResampler {
    constructor(from, to) {
      this.step = from / to;
      this.pos = 0;
      this.prev = null;
    }
    process(x) {
      const buf = this.prev === null ? x : new Float32Array(x.length + 1);
      if (this.prev !== null) {
        buf[0] = this.prev;
        buf.set(x, 1);
      }
      const out = [];
      while (this.pos + 1 < buf.length) {
        const i = Math.floor(this.pos);
        const f = this.pos - i;
        out.push(buf[i] + (buf[i + 1] - buf[i]) * f);
        this.pos += this.step;
      }
      this.pos -= buf.length - 1;
      this.prev = buf[buf.length - 1];
      return Float32Array.from(out);
    }
  }

  function toPcm16(x) {
    const out = new Int16Array(x.length);
    for (let i = 0; i < x.length; i++) {
      const s = Math.max(-1, Math.min(1, x[i]));
      out[i] = s < 0 ? Math.round(s * 32768) : Math.round(s * 32767);
    }
    return out;
  }

  // ---- microphone ----
  function onCaptureBlock(block) {
    let sum = 0;
    for (let i = 0; i < block.length; i++) sum += block[i] * block[i];
    const db = 10 * Math.log10(sum / block.length + 1e-12);
    const target = Math.max(0, Math.min(1, (db + 60) / 60));
    level = target > level ? target : level * 0.85 + target * 0.15;
    const meter = $("level");
    meter.style.setProperty("--level", level.toFixed(3));
    meter.setAttribute("aria-valuenow", String(Math.round(level * 100)));

    if (rtc || !ready || !ws || ws.readyState !== WebSocket.OPEN) return; // nothing before `ready`; WebRTC: RTP
    const x = upsampler ? upsampler.process(block) : block;
    if (x.length === 0) return;
    const pcm = toPcm16(x);
    const maxSamples = Math.floor(maxFrameBytes / 2);
    for (let i = 0; i < pcm.length; i += maxSamples) ws.send(pcm.subarray(i, i + maxSamples));
  }

  async function startMicrophone() {
    // ?processing=0 turns the browser's echo cancellation, noise suppression and gain control
    // off (for checking the capture path against a known file); the default is on.
    const on = params.get("processing") !== "0";
    stream = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation: on, noiseSuppression: on, autoGainControl: on, channelCount: 1 },
    });
    source = ctx.createMediaStreamSource(stream);
    capture = new AudioWorkletNode(ctx, "capture", {
      numberOfInputs: 1,
      numberOfOutputs: 0,
      channelCount: 1,
      channelCountMode: "explicit",
      channelInterpretation: "speakers",
      processorOptions: { blockSize: Math.round(ctx.sampleRate / 50) },
    });
    capture.port.onmessage = (e) => onCaptureBlock(e.data);
    source.connect(capture);
    $("listening").dataset.state = "listening";
    $("listening-label").textContent = "Listening";
  }

  // ---- playback ----
  function onPlayerProgress(msg) {
    if (msg.type !== "progress") return;
    state.played = msg.played;
    state.dropped = msg.dropped;
    $("speaker").dataset.state = msg.buffered > 0 ? (msg.paused ? "paused" : "playing") : "idle";
    if (ready && (msg.flushed || msg.played !== lastSent.played || msg.dropped !== lastSent.dropped)) {
      lastSent = { played: msg.played, dropped: msg.dropped };
      send({ type: "played", samples: msg.played, dropped: msg.dropped });
    }
    renderSpoken();
  }

  function onReplyAudio(buf) {
    if (buf.byteLength < 2) return;
    const pcm = new Int16Array(buf, 0, buf.byteLength >> 1);
    const x = new Float32Array(pcm.length);
    for (let i = 0; i < pcm.length; i++) x[i] = pcm[i] / 32768;
    received += x.length;
    state.received = received;
    if (player) player.port.postMessage({ type: "push", samples: x }, [x.buffer]);
    $("speaker").dataset.state = "playing";
  }

  // ---- transcript display ----
  function bubble(role, label) {
    const el = document.createElement("li");
    el.className = `turn ${role}`;
    const who = document.createElement("span");
    who.className = "who";
    who.textContent = label;
    const body = document.createElement("p");
    body.className = "text";
    el.append(who, body);
    $("log").append(el);
    scrollLog();
    return el;
  }

  function assistantEntry(response) {
    let a = byResponse.get(response);
    if (!a) {
      a = { response, text: "", heard: null, interrupted: false, done: false, chunks: [], el: bubble("assistant", "Assistant") };
      a.el.querySelector(".text").textContent = "…";
      byResponse.set(response, a);
      state.assistant.push(a);
    }
    return a;
  }

  // Split `full` at the end of what was heard: [heard part, unheard rest].
  function splitHeard(full, heard) {
    const h = (heard || "").trim();
    if (!h) return ["", full];
    if (full.startsWith(h)) return [h, full.slice(h.length)];
    const norm = (w) => w.toLowerCase().replace(/[^\p{L}\p{N}']+/gu, "");
    const want = h.split(/\s+/).map(norm).filter(Boolean);
    const re = /\S+/g;
    let m;
    let k = 0;
    let cut = 0;
    while (k < want.length && (m = re.exec(full)) !== null) {
      const w = norm(m[0]);
      if (!w) continue;
      if (w !== want[k]) break;
      k++;
      cut = m.index + m[0].length;
    }
    return [full.slice(0, cut), full.slice(cut)];
  }

  function renderAssistant(a) {
    const body = a.el.querySelector(".text");
    body.replaceChildren();
    a.el.classList.toggle("interrupted", a.interrupted);
    if (a.interrupted && a.heard !== null) {
      const [heard, rest] = splitHeard(a.text, a.heard);
      const h = document.createElement("span");
      h.className = "heard";
      h.textContent = heard;
      body.append(h);
      if (rest.trim()) {
        const lead = rest.match(/^\s*/)[0];
        if (lead) body.append(lead);
        const d = document.createElement("del");
        d.className = "unheard";
        d.title = "not heard";
        d.setAttribute("aria-label", `not heard: ${rest.trim()}`);
        d.textContent = rest.slice(lead.length);
        body.append(d);
      }
      const cut = document.createElement("span");
      cut.className = "cut";
      cut.textContent = " ✂ interrupted";
      body.append(cut);
      return;
    }
    if (a.chunks.length === 0) {
      body.textContent = a.done ? "(no reply)" : "…";
      return;
    }
    a.chunks.forEach((c, i) => {
      const s = document.createElement("span");
      s.className = a.done || state.played + state.dropped >= c.start ? "chunk spoken" : "chunk pending";
      s.textContent = (i ? " " : "") + c.text;
      body.append(s);
    });
    if (a.interrupted) {
      const cut = document.createElement("span");
      cut.className = "cut";
      cut.textContent = " ✂ interrupted";
      body.append(cut);
    }
  }

  function renderSpoken() {
    for (const a of state.assistant) {
      if (a.done || a.interrupted) continue;
      const spans = a.el.querySelectorAll(".chunk.pending");
      spans.forEach((s, i) => {
        const c = a.chunks[a.chunks.length - spans.length + i];
        if (c && state.played + state.dropped >= c.start) s.className = "chunk spoken";
      });
    }
  }

  function onEvent(msg) {
    state.events.push(msg.type);
    switch (msg.type) {
      case "ready":
        onReady(msg);
        break;
      case "speech_start":
        $("listening").dataset.state = "speech";
        $("listening-label").textContent = "Hearing you";
        break;
      case "speech_end":
        $("listening").dataset.state = "listening";
        $("listening-label").textContent = "Listening";
        break;
      case "transcript_partial":
        $("partial").textContent = msg.text || "…";
        break;
      case "transcript_final": {
        $("partial").textContent = "";
        const text = (msg.text || "").trim();
        if (!text) break; // no words
        state.transcripts.push(text);
        // The language it was heard in, when the server is not held to English ("You · es").
        const entry = bubble("user", msg.language ? `You · ${msg.language}` : "You");
        const said = entry.querySelector(".text");
        said.textContent = text;
        if (msg.language) said.lang = msg.language;
        break;
      }
      case "response_start":
        assistantEntry(msg.response);
        $("cancel").disabled = false;
        break;
      case "assistant_text": {
        const a = assistantEntry(msg.response);
        a.chunks.push({ text: msg.text, start: received });
        a.text = a.chunks.map((c) => c.text).join(" ");
        renderAssistant(a);
        scrollLog();
        break;
      }
      case "playback_paused":
        if (player) player.port.postMessage({ type: "pause" });
        break;
      case "playback_resumed":
        if (player) player.port.postMessage({ type: "resume" });
        break;
      case "barge_in": {
        const a = byResponse.get(msg.response);
        if (a) a.el.classList.add("barged");
        break;
      }
      case "playback_stopped":
        if (player) {
          player.port.postMessage({ type: "flush" });
          player.port.postMessage({ type: "resume" });
        }
        break;
      case "truncate": {
        const a = assistantEntry(msg.response);
        a.heard = msg.text || "";
        a.interrupted = true;
        renderAssistant(a);
        break;
      }
      case "turn_end": {
        const a = assistantEntry(msg.response);
        a.done = true;
        if (msg.interrupted) a.interrupted = true;
        if (a.heard === null) a.heard = a.interrupted ? msg.text || "" : a.text;
        renderAssistant(a);
        if (![...byResponse.values()].some((x) => !x.done)) $("cancel").disabled = true;
        break;
      }
      case "backchannel": {
        const el = bubble("user backchannel", "You (aside)");
        el.querySelector(".text").textContent = msg.text;
        break;
      }
      case "tool_call": {
        // A line per call: what the model asked, then (tool_result) what came of it.
        const el = bubble("tool", "Tool");
        el.querySelector(".text").textContent = `${msg.name}(${msg.arguments}) …`;
        toolCalls.set(msg.call_id, el);
        state.tools.push({ call_id: msg.call_id, name: msg.name, status: null });
        break;
      }
      case "tool_result": {
        const el = toolCalls.get(msg.call_id) || bubble("tool", "Tool");
        el.querySelector(".text").textContent = `${msg.name} → ${msg.status}: ${msg.result}`;
        el.classList.add(msg.status);
        const t = state.tools.find((x) => x.call_id === msg.call_id);
        if (t) t.status = msg.status;
        break;
      }
      case "error":
        showError(msg.code, msg.message, msg.fatal);
        break;
      case "close": // WebRTC: the server ends the session (a data channel has no close codes)
        finish(msg.code, msg.reason);
        break;
      default:
        break;
    }
  }

  function onReady(msg) {
    state.outputRate = msg.output_sample_rate;
    if (rtc) {
      ready = true; // the microphone is on already: its track is in the offer
      setStatus("ready", `session ${String(msg.session || "").slice(0, 8)} (WebRTC)`);
      return;
    }
    if (msg.max_frame_bytes) maxFrameBytes = msg.max_frame_bytes;
    if (player) player.port.postMessage({ type: "rate", serverRate: msg.output_sample_rate });
    startMicrophone().then(
      () => {
        ready = true;
        setStatus("ready", `session ${String(msg.session || "").slice(0, 8)}`);
      },
      (err) => {
        showError("microphone", String((err && err.message) || err), true);
        setStatus("error", "no microphone");
        if (ws) ws.close(1000);
      }
    );
  }

  // ---- start / stop ----
  async function start() {
    if (state.status !== "idle" && state.status !== "closed" && state.status !== "error") return;
    setStatus("starting");
    ready = false;
    received = 0;
    lastSent = { played: 0, dropped: 0 };
    // A new connection numbers its responses from the start again: new bubbles, new counters.
    byResponse.clear();
    state.received = state.played = state.dropped = 0;
    state.close = null;
    try {
      try {
        ctx = new AudioContext({ sampleRate: WANTED_RATE, latencyHint: "interactive" });
      } catch (_e) {
        ctx = new AudioContext({ latencyHint: "interactive" });
      }
      state.sampleRate = ctx.sampleRate;
      if (RATES.includes(ctx.sampleRate)) {
        sendRate = ctx.sampleRate;
        upsampler = null;
      } else {
        sendRate = ctx.sampleRate > 48000 ? 48000 : WANTED_RATE;
        upsampler = new LinearResampler(ctx.sampleRate, sendRate);
      }
      await ctx.audioWorklet.addModule("worklets.js");
      await ctx.resume();
      player = new AudioWorkletNode(ctx, "player", {
        numberOfInputs: 0,
        numberOfOutputs: 1,
        outputChannelCount: [1],
        processorOptions: { serverRate: ctx.sampleRate },
      });
      player.port.onmessage = (e) => onPlayerProgress(e.data);
      player.connect(ctx.destination);
    } catch (err) {
      showError("audio", String((err && err.message) || err), true);
      setStatus("error", "audio unavailable");
      return;
    }

    setStatus("connecting");
    const token = params.get("token");
    state.transport = document.querySelector('input[name="transport"]:checked')?.value || "ws";
    if (state.transport === "webrtc") {
      startWebRTC(token).catch((err) => {
        showError("webrtc", String((err && err.message) || err), true);
        setStatus("error", "WebRTC failed");
        finish(1006, "WebRTC failed");
      });
      return;
    }
    const url = `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/ws${
      token ? `?token=${encodeURIComponent(token)}` : ""
    }`;
    ws = new WebSocket(url);
    ws.binaryType = "arraybuffer";
    // ?language=es (or auto): the language the person speaks; else the server's --language.
    const language = params.get("language");
    ws.onopen = () =>
      send({ type: "hello", sample_rate: sendRate, acks: true, echo_cancel: false, ...(language ? { language } : {}) });
    ws.onmessage = (e) => (typeof e.data === "string" ? onMessage(e.data) : onReplyAudio(e.data));
    ws.onerror = () => {};
    ws.onclose = (e) => closed(e.code, e.reason);
  }

  // A JSON message from the server (on the WebSocket, or WebRTC's data channel).
  function onMessage(text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch (_e) {
      return;
    }
    if (msg && typeof msg.type === "string") onEvent(msg);
  }

  function closed(code, reason) {
    state.close = { code, reason: reason || "" };
    const wasError = state.status === "error";
    teardown();
    if (!wasError) setStatus("closed", `code ${code}${reason ? ` ${reason}` : ""}`);
  }

  // ---- WebRTC ----
  async function startWebRTC(token) {
    await startMicrophone(); // its track goes in the offer (and feeds the level meter)
    const pc = new RTCPeerConnection({ iceServers: [] });
    rtc = { pc, dc: null, audio: null };
    for (const track of stream.getAudioTracks()) pc.addTrack(track, stream);
    const dc = pc.createDataChannel("events");
    rtc.dc = dc;
    dc.onopen = () => send({ type: "hello", sample_rate: 48000 });
    dc.onmessage = (e) => typeof e.data === "string" && onMessage(e.data);
    pc.ontrack = (e) => {
      const audio = new Audio();
      audio.autoplay = true;
      audio.srcObject = e.streams[0] || new MediaStream([e.track]);
      audio.play().catch(() => {});
      if (rtc) rtc.audio = audio;
      $("speaker").dataset.state = "playing";
    };
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === "failed") finish(1006, "the WebRTC connection failed");
    };
    await pc.setLocalDescription(await pc.createOffer());
    // No trickle: the offer goes with its candidates.
    if (pc.iceGatheringState !== "complete") {
      await new Promise((resolve) => {
        const done = () => pc.iceGatheringState === "complete" && resolve();
        pc.addEventListener("icegatheringstatechange", done);
        setTimeout(resolve, 3000);
      });
    }
    const response = await fetch(`/webrtc/offer${token ? `?token=${encodeURIComponent(token)}` : ""}`, {
      method: "POST",
      headers: { "Content-Type": "application/sdp" },
      body: pc.localDescription.sdp,
    });
    const body = await response.text();
    if (!response.ok) throw new Error(`the offer was refused: ${response.status} ${body.trim()}`);
    await pc.setRemoteDescription({ type: "answer", sdp: body });
  }

  // The end of a WebRTC session: the server's close message, a failed connection, or Stop.
  function finish(code, reason) {
    if (!rtc) return;
    const { pc, audio } = rtc;
    rtc = null;
    if (audio) audio.srcObject = null;
    pc.close();
    closed(code, reason);
  }

  function teardown() {
    ready = false;
    if (stream) stream.getTracks().forEach((t) => t.stop());
    if (source) source.disconnect();
    if (capture) capture.port.onmessage = null;
    if (ctx) ctx.close().catch(() => {});
    stream = source = capture = player = ctx = null;
    $("listening").dataset.state = "off";
    $("listening-label").textContent = "Not listening";
    $("speaker").dataset.state = "idle";
    $("cancel").disabled = true;
    $("level").style.setProperty("--level", "0");
  }

  function stop() {
    if (rtc) finish(1000, "bye");
    else if (ws && ws.readyState <= WebSocket.OPEN) ws.close(1000, "bye");
    else {
      teardown();
      setStatus("closed");
    }
  }

  $("start").addEventListener("click", () => {
    if (state.status === "idle" || state.status === "closed" || state.status === "error") start();
    else stop();
  });
  $("cancel").addEventListener("click", () => send({ type: "cancel" }));
  if (params.get("transport") === "webrtc") document.querySelector('input[value="webrtc"]').checked = true;
  setStatus("idle");
  if (params.get("autostart") === "1") start();
})();
