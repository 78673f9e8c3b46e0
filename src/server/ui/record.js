// Audio for the composer: a recording from the microphone (Web Audio: the mic's samples captured
// as they come, then written as a 16-bit mono WAV at the context's rate — the server resamples to
// 16 kHz) or an attached file, each kept as {data: base64, format, name, seconds} and sent as an
// OpenAI `input_audio` part. A ScriptProcessorNode, not an AudioWorklet: it needs no module file
// and every browser still has it; the samples are only copied, so its main-thread cost is small.

// Float samples in [-1, 1] → the bytes of a RIFF/WAVE file, PCM 16-bit, one channel.
export function encodeWav(samples, rate) {
  const buf = new ArrayBuffer(44 + samples.length * 2);
  const v = new DataView(buf);
  const text = (at, s) => { for (let i = 0; i < s.length; i++) v.setUint8(at + i, s.charCodeAt(i)); };
  text(0, 'RIFF');
  v.setUint32(4, 36 + samples.length * 2, true);
  text(8, 'WAVE');
  text(12, 'fmt ');
  v.setUint32(16, 16, true);
  v.setUint16(20, 1, true);          // PCM
  v.setUint16(22, 1, true);          // mono
  v.setUint32(24, rate, true);
  v.setUint32(28, rate * 2, true);   // bytes a second
  v.setUint16(32, 2, true);          // bytes a frame
  v.setUint16(34, 16, true);         // bits a sample
  text(36, 'data');
  v.setUint32(40, samples.length * 2, true);
  for (let i = 0; i < samples.length; i++) {
    const x = Math.max(-1, Math.min(1, samples[i]));
    v.setInt16(44 + i * 2, x < 0 ? x * 0x8000 : x * 0x7fff, true);
  }
  return new Uint8Array(buf);
}

export function toBase64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

// A WAV of `samples` at `rate` as a clip for the composer.
export function wavClip(samples, rate, name) {
  return {data: toBase64(encodeWav(samples, rate)), format: 'wav', name, seconds: samples.length / rate};
}

// The formats the server decodes, from a file's type or name; null for others.
export function fileFormat(file) {
  const m = /(wav|wave|x-wav|mpeg|mp3|flac|ogg|opus)$/.exec((file.type || '') + ' ' + file.name.toLowerCase());
  if (!m) return null;
  return {wave: 'wav', 'x-wav': 'wav', mpeg: 'mp3', opus: 'ogg'}[m[1]] || m[1];
}

// Starts recording from the microphone; resolves to {stop()} whose promise gives the clip.
export async function startRecording() {
  const stream = await navigator.mediaDevices.getUserMedia({audio: true});
  const ctx = new AudioContext();
  const src = ctx.createMediaStreamSource(stream);
  const proc = ctx.createScriptProcessor(4096, 1, 1);
  const chunks = [];
  proc.onaudioprocess = e => chunks.push(new Float32Array(e.inputBuffer.getChannelData(0)));
  src.connect(proc);
  proc.connect(ctx.destination);
  return {
    async stop() {
      proc.disconnect();
      src.disconnect();
      stream.getTracks().forEach(t => t.stop());
      const rate = ctx.sampleRate;
      await ctx.close();
      const all = new Float32Array(chunks.reduce((n, c) => n + c.length, 0));
      let at = 0;
      for (const c of chunks) { all.set(c, at); at += c.length; }
      return wavClip(all, rate, 'recording.wav');
    },
  };
}
