#!/usr/bin/env python3
"""dns-stub.py: a tiny unicast DNS server for the wide-area DNS-SD test, run by avahi-netns.sh
inside the test's network namespace on 127.0.0.1:53 (never outside it).

It logs every question ("QNAME TYPE") to --log and answers, for --zone, from the JSON file
<dir of --log>/wide-area.json, read on every query so a test can change it while it runs:
  {"instances": [{"name": "Office Gateway", "port": 18789, "host": "gw-wan",
                  "address": "127.0.0.1", "txt": ["role=gateway", ...]}]}
as DNS-SD records: PTR _openclaw-gw._tcp.<zone> -> <name>._openclaw-gw._tcp.<zone>, SRV and TXT
on the instance, A on <host>.<zone>. Anything else is NXDOMAIN (names in the zone) or REFUSED.
Standard library only.
"""
import argparse, json, os, socket, struct

A, PTR, TXT, SRV, AAAA, ANY = 1, 12, 16, 33, 28, 255
TYPES = {1: "A", 12: "PTR", 16: "TXT", 33: "SRV", 28: "AAAA", 6: "SOA", 2: "NS", 255: "ANY"}
SERVICE = "_openclaw-gw._tcp"


def read_name(msg, off):
    labels, jumped, end = [], False, off
    while True:
        n = msg[off]
        if n & 0xC0 == 0xC0:
            if not jumped:
                end = off + 2
            off = ((n & 0x3F) << 8) | msg[off + 1]
            jumped = True
            continue
        off += 1
        if n == 0:
            break
        labels.append(msg[off:off + n])
        off += n
    return labels, (end if jumped else off)


def encode_labels(labels):
    return b"".join(bytes([len(l)]) + l for l in labels) + b"\0"


def name_labels(text):
    return [l.encode() for l in text.rstrip(".").split(".") if l]


def dotted(labels):
    # \DDD escapes for bytes outside letters/digits/-/_ so the log shows spaces unambiguously.
    out = []
    for l in labels:
        out.append("".join(chr(b) if (chr(b).isalnum() or chr(b) in "-_") else "\\%03d" % b for b in l))
    return ".".join(out) + "."


def rr(labels, rtype, ttl, rdata):
    return encode_labels(labels) + struct.pack(">HHIH", rtype, 1, ttl, len(rdata)) + rdata


def answers(qlabels, qtype, zone, instances):
    low = [l.lower() for l in qlabels]
    zl = [l.lower() for l in zone]
    if low[-len(zl):] != zl:
        return None
    svc = name_labels(SERVICE) + zone
    out = []
    for inst in instances:
        ilabels = [inst["name"].encode()] + svc
        host = name_labels(inst.get("host", "gw")) + zone
        if low == [l.lower() for l in svc] and qtype in (PTR, ANY):
            out.append(rr(svc, PTR, 60, encode_labels(ilabels)))
        if low == [l.lower() for l in ilabels]:
            if qtype in (SRV, ANY):
                out.append(rr(ilabels, SRV, 60, struct.pack(">HHH", 0, 0, int(inst["port"])) + encode_labels(host)))
            if qtype in (TXT, ANY):
                data = b"".join(bytes([len(t.encode())]) + t.encode() for t in inst.get("txt", [])) or b"\0"
                out.append(rr(ilabels, TXT, 60, data))
        if low == [l.lower() for l in host] and qtype in (A, ANY):
            out.append(rr(host, A, 60, socket.inet_aton(inst.get("address", "127.0.0.1"))))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zone", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=53)
    args = ap.parse_args()
    zone = name_labels(args.zone)
    config = os.path.join(os.path.dirname(args.log), "wide-area.json")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", args.port))
    while True:
        msg, peer = sock.recvfrom(4096)
        try:
            qid, flags, qd = struct.unpack(">HHH", msg[:6])
            if qd < 1:
                continue
            qlabels, off = read_name(msg, 12)
            qtype, qclass = struct.unpack(">HH", msg[off:off + 4])
            question = msg[12:off + 4]
            with open(args.log, "a") as f:
                f.write("%s %s\n" % (dotted(qlabels), TYPES.get(qtype, str(qtype))))
            try:
                with open(config) as f:
                    instances = json.load(f).get("instances", [])
            except (OSError, ValueError):
                instances = []
            ans = answers(qlabels, qtype, zone, instances)
            rcode = 5 if ans is None else (0 if ans else 3)
            ans = ans or []
            header = struct.pack(">HHHHHH", qid, 0x8400 | (flags & 0x0100) | rcode, 1, len(ans), 0, 0)
            sock.sendto(header + question + b"".join(ans), peer)
        except (IndexError, struct.error):
            continue


if __name__ == "__main__":
    main()
