#include "media/audio_decode.h"

#include <sndfile.h>
#include <soxr.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "media/audio_features.h"
#include "media/audio_ogg.h"

namespace sluice::media {

const char* audio_format_name(AudioFormat f) {
  switch (f) {
    case AudioFormat::kWav: return "wav";
    case AudioFormat::kFlac: return "flac";
    case AudioFormat::kOgg: return "ogg";
    case AudioFormat::kMp3: return "mp3";
    case AudioFormat::kUnknown: break;
  }
  return "unknown";
}

namespace {

bool starts_with(std::span<const uint8_t> b, size_t off, const char* magic, size_t n) {
  return b.size() >= off + n && std::memcmp(b.data() + off, magic, n) == 0;
}

// An MPEG-1/2/2.5 audio frame header: 11 sync bits, a version other than "reserved" and a layer
// other than "reserved" (which also rules out AAC's ADTS, layer 0).
bool mpeg_frame_sync(std::span<const uint8_t> b) {
  return b.size() >= 4 && b[0] == 0xFF && (b[1] & 0xE0) == 0xE0 && ((b[1] >> 3) & 3) != 1 && ((b[1] >> 1) & 3) != 0;
}

// The libsndfile major formats each sniffed container may turn out to be.
bool major_matches(AudioFormat f, int sf_format) {
  const int major = sf_format & SF_FORMAT_TYPEMASK;
  switch (f) {
    case AudioFormat::kWav: return major == SF_FORMAT_WAV || major == SF_FORMAT_WAVEX || major == SF_FORMAT_RF64;
    case AudioFormat::kFlac: return major == SF_FORMAT_FLAC;
    case AudioFormat::kOgg: return major == SF_FORMAT_OGG;
    case AudioFormat::kMp3: return major == SF_FORMAT_MPEG;
    case AudioFormat::kUnknown: break;
  }
  return false;
}

// libsndfile's virtual I/O over the bytes in memory (read only).
struct MemoryFile {
  std::span<const uint8_t> bytes;
  sf_count_t pos = 0;
};
sf_count_t mem_length(void* user) { return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes.size()); }
sf_count_t mem_seek(sf_count_t offset, int whence, void* user) {
  MemoryFile* m = static_cast<MemoryFile*>(user);
  const sf_count_t size = static_cast<sf_count_t>(m->bytes.size());
  sf_count_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? size : 0;
  if (offset > 0 && base > INT64_MAX - offset) return -1;
  const sf_count_t to = base + offset;
  if (to < 0) return -1;
  m->pos = std::min(to, size);
  return m->pos;
}
sf_count_t mem_read(void* ptr, sf_count_t count, void* user) {
  MemoryFile* m = static_cast<MemoryFile*>(user);
  const sf_count_t size = static_cast<sf_count_t>(m->bytes.size());
  const sf_count_t n = std::clamp<sf_count_t>(size - m->pos, 0, std::max<sf_count_t>(count, 0));
  if (n > 0) std::memcpy(ptr, m->bytes.data() + m->pos, static_cast<size_t>(n));
  m->pos += n;
  return n;
}
sf_count_t mem_write(const void*, sf_count_t, void*) { return 0; }
sf_count_t mem_tell(void* user) { return static_cast<MemoryFile*>(user)->pos; }

struct SndfileCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
struct SoxrDeleter {
  void operator()(soxr* s) const { soxr_delete(s); }
};

// Averages the channels of `frames` interleaved frames into `mono` (librosa's to_mono: the f32
// sum over channels, divided by the count).
void downmix(const float* in, int64_t frames, int32_t channels, std::vector<float>& mono) {
  mono.resize(static_cast<size_t>(frames));
  for (int64_t i = 0; i < frames; ++i) {
    const float* f = in + i * channels;
    float s = f[0];
    for (int32_t c = 1; c < channels; ++c) s += f[c];
    mono[static_cast<size_t>(i)] = channels == 1 ? s : s / static_cast<float>(channels);
  }
}

// Streams mono blocks at `rate` Hz to 16 kHz with libsoxr (HQ, linear phase, as python-soxr's
// "soxr_hq" that librosa uses); `finish` flushes and fixes the length to ceil(n·16000/rate) as
// librosa.resample(fix=True) computes it (zero-padding or trimming soxr's output).
class Resampler {
 public:
  Resampler(int32_t rate, const std::string& name) : rate_(rate), name_(name) {
    if (rate_ == kAudioSampleRate) return;
    soxr_error_t err = nullptr;
    const soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_.reset(soxr_create(rate_, kAudioSampleRate, 1, &err, &io, &q, nullptr));
    if (err || !soxr_) fail("%s: cannot resample %d Hz to 16 kHz (libsoxr: %s)", name_.c_str(), rate_, err ? err : "?");
  }

  void push(const float* in, size_t n) {
    in_count_ += static_cast<int64_t>(n);
    if (!soxr_) {
      out_.insert(out_.end(), in, in + n);
      return;
    }
    run(in, n);
  }

  std::vector<float> finish() {
    if (soxr_) run(nullptr, 0);
    // librosa's n_samples = int(np.ceil(n * (target / orig))) in double, which is one more than
    // the exact ceiling for some n (e.g. 199920 samples at 7350 Hz: 435201).
    const double ratio = static_cast<double>(kAudioSampleRate) / rate_;
    const int64_t want = static_cast<int64_t>(std::ceil(static_cast<double>(in_count_) * ratio));
    out_.resize(static_cast<size_t>(want), 0.0f);
    // Finite input can still overflow: float samples near 3.4e38 summed by the downmix or
    // filtered by soxr become inf or NaN, which the features would turn into NaN.
    for (size_t i = 0; i < out_.size(); ++i)
      if (!std::isfinite(out_[i]))
        fail("%s: the audio's samples are too large to process (the 16 kHz mono sample %zu is not finite)",
             name_.c_str(), i);
    return std::move(out_);
  }

 private:
  // Feeds `n` samples (nullptr: the end of input) and drains what soxr has ready.
  void run(const float* in, size_t n) {
    float buf[4096];
    for (;;) {
      size_t used = 0, done = 0;
      const soxr_error_t err = soxr_process(soxr_.get(), in, n, &used, buf, std::size(buf), &done);
      if (err) fail("%s: resampling failed (libsoxr: %s)", name_.c_str(), err);
      out_.insert(out_.end(), buf, buf + done);
      if (in) in += used;
      n -= used;
      if (done == 0 && (n == 0 || used == 0)) return;
    }
  }

  int32_t rate_;
  const std::string& name_;
  std::unique_ptr<soxr, SoxrDeleter> soxr_;
  std::vector<float> out_;
  int64_t in_count_ = 0;
};

// The header's rate, channels and (when known) duration against the limits.
void check_header(const SF_INFO& info, AudioFormat f, const std::string& name, const AudioLimits& limits) {
  const char* fmt = audio_format_name(f);
  if (info.channels < 1 || info.channels > limits.max_channels)
    fail("%s: %s audio has %d channels, outside 1..%d", name.c_str(), fmt, info.channels, limits.max_channels);
  if (info.samplerate < limits.min_sample_rate || info.samplerate > limits.max_sample_rate)
    fail("%s: %s audio has a sample rate of %d Hz, outside %d..%d Hz", name.c_str(), fmt, info.samplerate,
         limits.min_sample_rate, limits.max_sample_rate);
  if (info.frames > 0 && info.frames != SF_COUNT_MAX &&
      static_cast<double>(info.frames) / info.samplerate > limits.max_seconds)
    fail("%s: %s audio lasts %.1f s, over the limit of %g s; refused before decoding", name.c_str(), fmt,
         static_cast<double>(info.frames) / info.samplerate, limits.max_seconds);
}

// Reads every frame in blocks, refusing non-finite samples and audio past the duration limit,
// and streams them through the downmix and the resampler.
std::vector<float> read_all(SNDFILE* sf, const SF_INFO& info, AudioFormat f, const std::string& name,
                            const AudioLimits& limits) {
  const char* fmt = audio_format_name(f);
  const double limit = std::ceil(limits.max_seconds * info.samplerate);  // frames; capped below 2^62
  const int64_t max_frames = limit < 4.6e18 ? static_cast<int64_t>(limit) : int64_t{1} << 62;
  constexpr sf_count_t kBlock = 8192;
  std::vector<float> block(static_cast<size_t>(kBlock) * info.channels), mono;
  Resampler rs(info.samplerate, name);
  int64_t total = 0;
  for (;;) {
    const sf_count_t got = sf_readf_float(sf, block.data(), kBlock);
    if (got <= 0) break;
    total += got;
    if (total > max_frames) fail("%s: %s audio lasts over the limit of %g s", name.c_str(), fmt, limits.max_seconds);
    for (size_t i = 0; i < static_cast<size_t>(got) * info.channels; ++i)
      if (!std::isfinite(block[i]))
        fail("%s: %s audio has a non-finite sample (frame %lld)", name.c_str(), fmt,
             static_cast<long long>(total - got + static_cast<int64_t>(i / info.channels)));
    downmix(block.data(), got, info.channels, mono);
    rs.push(mono.data(), mono.size());
  }
  if (sf_error(sf) != SF_ERR_NO_ERROR)
    fail("%s: %s audio is corrupt after %lld frames (libsndfile: %s)", name.c_str(), fmt, static_cast<long long>(total),
         sf_strerror(sf));
  if (total == 0) fail("%s: %s audio has no samples", name.c_str(), fmt);
  std::vector<float> out = rs.finish();
  if (out.empty()) fail("%s: %s audio is shorter than one sample at 16 kHz", name.c_str(), fmt);
  return out;
}

}  // namespace

AudioFormat sniff_audio_format(std::span<const uint8_t> b) {
  if ((starts_with(b, 0, "RIFF", 4) || starts_with(b, 0, "RF64", 4)) && starts_with(b, 8, "WAVE", 4))
    return AudioFormat::kWav;
  if (starts_with(b, 0, "fLaC", 4)) return AudioFormat::kFlac;
  if (starts_with(b, 0, "OggS", 4)) return AudioFormat::kOgg;
  if (starts_with(b, 0, "ID3", 3) || mpeg_frame_sync(b)) return AudioFormat::kMp3;
  return AudioFormat::kUnknown;
}

DecodedAudio decode_audio(std::span<const uint8_t> bytes, const std::string& name, const AudioLimits& limits) {
  if (bytes.empty()) fail("%s: the audio is empty (0 bytes)", name.c_str());
  if (static_cast<int64_t>(bytes.size()) > limits.max_bytes)
    fail("%s: the audio is %zu bytes, over the limit of %lld; refused before decoding", name.c_str(), bytes.size(),
         static_cast<long long>(limits.max_bytes));
  DecodedAudio out;
  out.format = sniff_audio_format(bytes);
  if (out.format == AudioFormat::kUnknown)
    fail("%s: not a supported audio format (WAV, FLAC, Ogg Vorbis/Opus or MP3)", name.c_str());
  if (out.format == AudioFormat::kOgg) {
    const std::string problem = vorbis_header_problem(bytes);
    if (!problem.empty()) fail("%s: the ogg audio's Vorbis headers are corrupt: %s", name.c_str(), problem.c_str());
  }
  MemoryFile mem{bytes, 0};
  SF_VIRTUAL_IO vio{mem_length, mem_seek, mem_read, mem_write, mem_tell};
  SF_INFO info{};
  std::unique_ptr<SNDFILE, SndfileCloser> sf(sf_open_virtual(&vio, SFM_READ, &info, &mem));
  const char* fmt = audio_format_name(out.format);
  if (!sf) fail("%s: cannot read the %s audio (libsndfile: %s)", name.c_str(), fmt, sf_strerror(nullptr));
  if (!major_matches(out.format, info.format))
    fail("%s: looks like %s but libsndfile reads it as another format (0x%x)", name.c_str(), fmt,
         info.format & SF_FORMAT_TYPEMASK);
  check_header(info, out.format, name, limits);
  out.source_rate = info.samplerate;
  out.source_channels = info.channels;
  out.samples = read_all(sf.get(), info, out.format, name, limits);
  return out;
}

DecodedAudio decode_audio_file(const std::string& path, const AudioLimits& limits) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) fail("%s: cannot open the audio file (%s)", path.c_str(), std::strerror(errno));
  if (st.st_size > limits.max_bytes)
    fail("%s: the audio file is %lld bytes, over the limit of %lld; refused before reading", path.c_str(),
         static_cast<long long>(st.st_size), static_cast<long long>(limits.max_bytes));
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f) fail("%s: cannot open the audio file (%s)", path.c_str(), std::strerror(errno));
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  if (!bytes.empty() && std::fread(bytes.data(), 1, bytes.size(), f.get()) != bytes.size())
    fail("%s: cannot read the audio file", path.c_str());
  return decode_audio(bytes, path, limits);
}

std::vector<float> to_mono_16k(std::span<const float> interleaved, int32_t channels, int32_t rate,
                               const std::string& name) {
  if (channels < 1 || rate < 1 || interleaved.size() % static_cast<size_t>(channels) != 0)
    fail("%s: %zu samples do not make whole frames of %d channels at %d Hz", name.c_str(), interleaved.size(), channels,
         rate);
  std::vector<float> mono;
  downmix(interleaved.data(), static_cast<int64_t>(interleaved.size() / static_cast<size_t>(channels)), channels, mono);
  Resampler rs(rate, name);
  rs.push(mono.data(), mono.size());
  return rs.finish();
}

}  // namespace sluice::media
