#!/usr/bin/env python3
"""Writes headset-playpause.events: a recorded evdev stream from a USB headset's play/pause
button, in exactly the bytes `cat /dev/input/eventN > file` captures on 64-bit Linux: one
`struct input_event` per event (timeval tv_sec s64, tv_usec s64, type u16, code u16,
value s32; 24 bytes, little-endian on x86_64 and aarch64). No header, no framing.

Run from this directory:  python3 make-headset-playpause.py
ButtonsTests checks the file against the same list written out in Swift
(`HeadsetFixture.events`), so edit both together.

The stream, as `evemu-record` would print it (time, type, code, value):
  0.000000  EV_MSC MSC_SCAN c00cd | EV_KEY KEY_PLAYPAUSE 1 | EV_SYN SYN_REPORT   press
  0.500000  EV_KEY KEY_PLAYPAUSE 2 | EV_SYN                                        repeat
  0.533000  EV_KEY KEY_PLAYPAUSE 2 | EV_SYN                                        repeat
  0.566000  EV_KEY KEY_PLAYPAUSE 2 | EV_SYN                                        repeat
  0.600000  EV_MSC MSC_SCAN c00e9 | EV_KEY KEY_VOLUMEUP 1 | EV_SYN                 other key
  0.680000  EV_MSC MSC_SCAN c00e9 | EV_KEY KEY_VOLUMEUP 0 | EV_SYN                 other key
  0.900000  EV_MSC MSC_SCAN c00cd | EV_KEY KEY_PLAYPAUSE 0 | EV_SYN                release
  2.000000  EV_MSC MSC_SCAN c00cd | EV_KEY KEY_PLAYPAUSE 1 | EV_SYN                second press
  2.350000  EV_MSC MSC_SCAN c00cd | EV_KEY KEY_PLAYPAUSE 0 | EV_SYN                second release
All times are offsets from 1737264000 s (2025-01-19T05:20:00Z).
"""
import struct

EV_SYN, EV_KEY, EV_MSC = 0x00, 0x01, 0x04
SYN_REPORT, MSC_SCAN = 0, 4
KEY_VOLUMEUP, KEY_PLAYPAUSE = 115, 164
BASE = 1737264000

def report(usec, *events):
    """One evdev report: the events, then SYN_REPORT, all stamped with the same time."""
    return [(usec, t, c, v) for (t, c, v) in events] + [(usec, EV_SYN, SYN_REPORT, 0)]

def key(usec, code, value, scan=None):
    events = [(EV_MSC, MSC_SCAN, scan)] if scan is not None else []
    return report(usec, *events, (EV_KEY, code, value))

stream = (
    key(0, KEY_PLAYPAUSE, 1, scan=0xC00CD)
    + key(500_000, KEY_PLAYPAUSE, 2)
    + key(533_000, KEY_PLAYPAUSE, 2)
    + key(566_000, KEY_PLAYPAUSE, 2)
    + key(600_000, KEY_VOLUMEUP, 1, scan=0xC00E9)
    + key(680_000, KEY_VOLUMEUP, 0, scan=0xC00E9)
    + key(900_000, KEY_PLAYPAUSE, 0, scan=0xC00CD)
    + key(2_000_000, KEY_PLAYPAUSE, 1, scan=0xC00CD)
    + key(2_350_000, KEY_PLAYPAUSE, 0, scan=0xC00CD)
)

with open("headset-playpause.events", "wb") as out:
    for usec, type_, code, value in stream:
        out.write(struct.pack("<qqHHi", BASE + usec // 1_000_000, usec % 1_000_000, type_, code, value))
print(f"wrote {len(stream)} events, {len(stream) * 24} bytes")
