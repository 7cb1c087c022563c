#!/usr/bin/env python3
"""Checks a binky linked for macOS the way dyld will read it: the Mach-O header is the
target's CPU, every library it loads is one every Mac has (/usr/lib or
/System/Library/Frameworks, never a path of the machine that built it), and an arm64
binary carries a code signature (Apple Silicon runs no unsigned code; the linker signs
ad hoc). Prints the libraries; exits 1 naming what is wrong.

Usage: scripts/macos/inspect.py BINARY aarch64|x86_64
"""
import struct
import sys

MH_MAGIC_64 = 0xFEEDFACF
CPU = {"aarch64": 0x0100000C, "x86_64": 0x01000007}
LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_CODE_SIGNATURE = 0xC, 0x80000018, 0x1D
SYSTEM = ("/usr/lib/", "/System/Library/Frameworks/")


def load_commands(data):
    magic, cpu, _sub, _type, ncmds, _size, _flags, _res = struct.unpack_from("<IiiIIIII", data, 0)
    if magic != MH_MAGIC_64:
        raise ValueError(f"not a 64-bit Mach-O file (magic {magic:#x})")
    off, cmds = 32, []
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, off)
        cmds.append((cmd, data[off : off + size]))
        off += size
    return cpu & 0xFFFFFFFF, cmds


def main(path, arch):
    data = open(path, "rb").read()
    cpu, cmds = load_commands(data)
    problems = []
    if cpu != CPU[arch]:
        problems.append(f"CPU type {cpu:#x}, not {arch}'s {CPU[arch]:#x}")
    libs = []
    for cmd, body in cmds:
        if cmd in (LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB):
            name_off = struct.unpack_from("<I", body, 8)[0]
            libs.append(body[name_off:].split(b"\0")[0].decode())
    for lib in libs:
        print(f"{path}: loads {lib}")
        if not lib.startswith(SYSTEM):
            problems.append(f"loads {lib}, which is not on every Mac")
    if arch == "aarch64" and not any(cmd == LC_CODE_SIGNATURE for cmd, _ in cmds):
        problems.append("no code signature: Apple Silicon would refuse to run it")
    for p in problems:
        print(f"{path}: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
