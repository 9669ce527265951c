// CSndFile: libsndfile, for reading the audio files a user hands the node (any WAV, FLAC, AIFF…).
#pragma once
#include <sndfile.h>
