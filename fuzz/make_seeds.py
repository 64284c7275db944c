#!/usr/bin/env python3
"""Writes the fuzzers' seed inputs (fuzz/seeds/<target>/): valid RecordBatch
v2 batches, a short valid segment, and well-formed index and checkpoint
files, so that mutation starts from inputs that pass the CRC checks."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def varint(v: int) -> bytes:
    z = (v << 1) ^ (v >> 63)
    z &= (1 << 64) - 1
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def record(offset_delta: int, value: bytes, key=None) -> bytes:
    body = b"\x00" + varint(offset_delta) + varint(offset_delta)
    body += varint(-1) if key is None else varint(len(key)) + key
    body += varint(len(value)) + value + varint(0)
    return varint(len(body)) + body


def batch(base: int, values, ts: int = 1_700_000_000_000) -> bytes:
    recs = b"".join(record(i, v) for i, v in enumerate(values))
    n = len(values)
    after_crc = struct.pack(">hiqqqhii", 0, n - 1, ts, ts + n - 1, -1, -1, -1, n) + recs
    length = 4 + 1 + 4 + len(after_crc)
    head = struct.pack(">qiib", base, length, -1, 2)
    return head + struct.pack(">I", crc32c(after_crc)) + after_crc


def write(target: str, name: str, data: bytes) -> None:
    with open(os.path.join(HERE, "seeds", target, name), "wb") as f:
        f.write(data)


def request(key: int, version: int, body: bytes, flexible: bool) -> bytes:
    """A request frame without its size: header v1, or v2 (tagged fields) when flexible."""
    head = struct.pack(">hhih", key, version, 1, 4) + b"fuzz"
    return head + (b"\x00" if flexible else b"") + body


def compact(b: bytes) -> bytes:
    return bytes([len(b) + 1]) + b


def main() -> None:
    handshake = struct.pack(">h", 13) + b"SCRAM-SHA-512"
    write("request_frame", "sasl_handshake_v1", request(17, 1, handshake, False))
    token = compact(b"n,,n=alice,r=abc") + b"\x00"
    write("request_frame", "sasl_authenticate_v2", request(36, 2, token, True))
    upsertion = compact(b"alice") + b"\x02" + struct.pack(">i", 4096) + compact(b"salt") + compact(b"\x07" * 32) + b"\x00"
    write("request_frame", "alter_user_scram_v0", request(51, 0, b"\x01\x02" + upsertion + b"\x00", True))
    write("batch_header", "one_record", batch(0, [b"hello"]))
    write("batch_header", "three_records", batch(7, [b"a", b"bb", b"ccc"]))
    segment = b"".join(batch(i * 3, [b"x" * 40] * 3) for i in range(4))
    write("segment_recovery", "four_batches", segment)
    write("segment_recovery", "torn_tail", segment[:-17])
    index = b"".join(struct.pack(">II", i * 4, i * 4096) for i in range(1, 9))
    write("index_files", "offset_index", index)
    timeindex = b"".join(struct.pack(">qI", 1000 + i, i * 4) for i in range(8))
    write("index_files", "time_index", timeindex)


if __name__ == "__main__":
    main()
