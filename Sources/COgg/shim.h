// COgg: libogg's framing (Ogg pages: lacing, sequence numbers, the page checksum).
#pragma once
#include <ogg/ogg.h>
