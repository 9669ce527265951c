"""Recorded English speech from a second Debian game: the voice acting of Beneath a Steel Sky
(`beneath-a-steel-sky`, the CD version Revolution released as freeware; a 66 MB download): 3,491
lines by a cast other than game_speech.py's, 8-bit 11 kHz, each packed with RNC ProPack, about
1.9 h. A check on unseen actors for a head trained on Flight of the Amazon Queen's lines
(sky_probe.py); it decides nothing.

The disk index (`sky.dnr`) is a little-endian entry count, then per entry a 16-bit file number and
two 24-bit fields: the offset into `sky.dsk` (bit 23: stored in 16-byte units) and the size (low
22 bits). Speech is files 50000-55999 (ScummVM's speech table adds 50000 to the line's number):
a 22-byte header, then an RNC method-1 block of unsigned 8-bit samples at 11,025 Hz, its CRC
checked here. The game's text is packed another way and is not read, so which lines say a trigger
is not known: no trigger is likely in a science-fiction adventure but "computer", and the computer
head is not scored here.
Standard library only.
"""
import os
import struct
import subprocess
import sys

GAME = "/usr/share/scummvm/beneath-a-steel-sky"
PACKAGE = "beneath-a-steel-sky"
RATE = 11025
SPEECH = range(50000, 56000)
HEADER = 22


def _crc_entry(byte):
    c = byte
    for _ in range(8):
        c = (c >> 1) ^ 0xA001 if c & 1 else c >> 1
    return c


_CRC_TABLE = [_crc_entry(b) for b in range(256)]


def _crc16(data):
    """RNC's checksum: CRC-16, polynomial 0xA001 (reflected), initial 0."""
    c = 0
    for b in data:
        c = (c >> 8) ^ _CRC_TABLE[(c ^ b) & 0xFF]
    return c


class _Bits:
    """RNC's bit reader: 16-bit little-endian words, least significant bit first, one word ahead
    (a literal run is copied from where that word was and the word read again after it)."""

    def __init__(self, data, pos):
        self.d, self.p = data, pos
        self.buf, self.count = self.word(pos), 16

    def word(self, p):
        return int.from_bytes(self.d[p:p + 2].ljust(2, b"\0"), "little")

    def advance(self, n):
        self.buf >>= n
        self.count -= n
        if self.count < 16:
            self.p += 2
            self.buf |= self.word(self.p) << self.count
            self.count += 16

    def read(self, n):
        r = self.buf & ((1 << n) - 1)
        self.advance(n)
        return r

    def refill(self):
        self.count -= 16
        self.buf = (self.buf & ((1 << self.count) - 1)) | (self.word(self.p) << self.count)
        self.count += 16


def _table(bits):
    """A Huffman table as [(code, mask, length, value)]: 5 bits of count, 4 bits per code length,
    canonical codes stored bit-reversed; None when the block keeps the previous table."""
    num = bits.read(5)
    if not num:
        return None
    lens = [bits.read(4) for _ in range(num)]
    out, code = [], 0
    for n in range(1, max(lens) + 1):
        for value, ln in enumerate(lens):
            if ln == n:
                out.append((int(f"{code:0{n}b}"[::-1], 2), (1 << n) - 1, n, value))
                code += 1
        code <<= 1
    return out


def _value(table, bits):
    for code, mask, n, v in table:
        if bits.buf & mask == code:
            bits.advance(n)
            return v if v < 2 else (1 << (v - 1)) | bits.read(v - 1)
    raise ValueError("bad Huffman code")


def unpack(block):
    """The bytes of an RNC method-1 block ("RNC\\x01", sizes and CRCs, 18 bytes, then the data)."""
    if block[:4] != b"RNC\x01":
        raise ValueError("not an RNC method-1 block")
    size, crc = struct.unpack(">I", block[4:8])[0], struct.unpack(">H", block[12:14])[0]
    out, bits = bytearray(), _Bits(block, 18)
    bits.advance(2)
    raw = dist = length = None
    while len(out) < size:
        raw, dist, length = _table(bits) or raw, _table(bits) or dist, _table(bits) or length
        count = bits.read(16)
        while True:
            n = _value(raw, bits)
            if n:
                out += block[bits.p:bits.p + n]
                bits.p += n
                bits.refill()
            count -= 1
            if count <= 0:
                break
            back, n = _value(dist, bits) + 1, _value(length, bits) + 2
            for _ in range(n):          # byte by byte: a copy may overlap what it writes
                out.append(out[-back])
    out = bytes(out[:size])
    if _crc16(out) != crc:
        raise ValueError("RNC checksum does not match")
    return out


def lines():
    """[(name, (offset, size))] of every spoken line, in file-number order; exits with the fix when
    the game is missing."""
    dnr = os.path.join(GAME, "sky.dnr")
    if not os.path.exists(dnr):
        sys.exit(f"sky_speech: no {dnr}; install it with: apt-get install {PACKAGE}")
    with open(dnr, "rb") as f:
        data = f.read()
    out = []
    for i in range(struct.unpack("<I", data[:4])[0]):
        e = data[4 + 8 * i:12 + 8 * i]
        nr, off, fl = struct.unpack("<H", e[:2])[0], int.from_bytes(e[2:5], "little"), int.from_bytes(e[5:8], "little")
        if nr in SPEECH:
            out.append((f"{nr}", ((off & 0x7FFFFF) << (4 if off >> 23 & 1 else 0), fl & 0x3FFFFF)))
    return sorted(out)


def read(where):
    """A line's samples, where = (offset, size), as 16 kHz mono 16-bit little-endian bytes (sox
    resamples the unsigned 8-bit 11,025 Hz PCM, no dither); exits when one does not unpack."""
    with open(os.path.join(GAME, "sky.dsk"), "rb") as f:
        f.seek(where[0])
        data = f.read(where[1])
    try:
        pcm = unpack(data[HEADER:])
    except ValueError as e:
        sys.exit(f"sky_speech: the line at {where[0]} of sky.dsk does not unpack: {e}")
    run = subprocess.run(["sox", "-D", "-t", "raw", "-r", str(RATE), "-e", "unsigned-integer", "-b", "8", "-c", "1", "-",
                          "-t", "raw", "-r", "16000", "-e", "signed-integer", "-b", "16", "-L", "-"], input=pcm, capture_output=True)
    if run.returncode != 0:
        sys.exit(f"sky_speech: sox could not resample: {run.stderr.decode(errors='replace').strip()} (apt-get install sox)")
    return run.stdout
