// Audio owns sound on this machine: PulseAudio capture and playback streams, ring buffers,
// resampling, Opus framing and Ogg, clip decoding, espeak-ng synthesis and endpointing.
// It knows nothing of the gateway protocol; it moves PCM and encoded bytes.
