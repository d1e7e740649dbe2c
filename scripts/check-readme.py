#!/usr/bin/env python3
"""check-readme.py - run every code block of README.md and every example in `fagen --help`, so no
snippet can rot. No GPU needed; standard library only.

  usage: scripts/check-readme.py [--build DIR] [--installed PREFIX] [--readme FILE] [--cc CC] [--cflags FLAGS]
                                 [--no-python REASON] [-v]
  (ctest runs it as check_readme, label unit; scripts/check-install.sh with --installed.)

What is run, block by block (fenced with ```sh, ```c, ```cmake, ```python; other blocks are text):
  sh      Each line (a trailing backslash continues it) is split at `&&`; each command is judged by its
          first word:
            fagen ... / ./build/tools/fagen/fagen ... / build/...   run, from a fresh scratch directory holding
                    only a link build -> DIR (files written with -o land there), with `fagen` on PATH,
                    under a time limit. Only the first command of a pipeline runs (what
                    follows `|`, such as `| head -80` or `| less`, only reads its output). fagen's GPU
                    commands (check, bench, tune: whatever `fagen --help` says runs on the GPU) run with
                    no GPU visible (CUDA_VISIBLE_DEVICES=""), so only their command line is checked: exit 1
                    (no GPU) passes, exit 2 (bad usage or impossible config) fails. Other commands must exit
                    0, or 1 when a CUDA library is missing (reported as a skip).
            python3 -c ... / python -c ...                            run with PYTHONPATH=python/src (the
                    package from the source tree, on DIR's libfajit.so); skipped, with the reason, when the
                    code imports torch and torch is missing.
            scripts/NAME                                              must exist and be executable (not run:
                    these are the set-up and test commands themselves). The README's test command must be
                    the command .ci/run runs.
            cmake, cc, pip, ...                                       only with --installed (below).
  c       Compiled as a C11 file with -Wall -Wextra -Werror against include/fajit.h. A block with main()
          is linked with DIR's libfajit.a and run (exit 0 passes; 77 is a skip); one without is only
          compiled.
  python  Run with PYTHONPATH=python/src; skipped, with the reason, when it imports torch and torch is
          missing, or when it needs a GPU (uses device="cuda") and torch sees none.
  cmake   Only with --installed PREFIX (scripts/check-install.sh passes its fresh prefix): the block is the
          body of a project whose app.c is the README's C block with main(); configured with
          CMAKE_PREFIX_PATH=PREFIX, built and run.
  With --installed, sh lines that name /opt/fajit (the README's example prefix) run with /opt/fajit
  replaced by PREFIX, from a directory holding that app.c (`cmake -S . -B build` and `cmake --build
  build` lines are not run: the build is what every test starts from).

A block is left out when the line before its opening fence is the marker
    <!-- readme-check: skip REASON -->
(REASON is printed). Keep these few: a GPU command is better shown as a line fagen parses (see above).

Every relative link of the README must name a file of the repository.

Then `fagen --help` and `fagen <command> --help` for every command it lists: every line that is an
example (`  fagen ...` under "examples:", or `example: fagen ...`) is run as an sh line.

Exit status: 0 when every check passed or was skipped with a reason, 1 otherwise, 2 bad usage.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!--\s*readme-check:\s*skip\b\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```\s*([A-Za-z0-9_+-]*)\s*$")
EXAMPLE_PREFIX = "/opt/fajit"
TIMEOUT = 120
# first words of sh lines that are not run in the build mode (the set-up, build and package steps)
NOT_RUN_HERE = ("cmake", "cc", "pip", "pip3", "make", "ctest")


class Checker:
    def __init__(self, build, installed, verbose, cc, cflags, no_python):
        self.cc, self.cflags, self.no_python = cc, cflags, no_python
        self.build = build
        self.installed = installed
        self.verbose = verbose
        self.passed = 0
        self.skipped = []
        self.failed = []
        self.scratch = Path(tempfile.mkdtemp(prefix="fajit-readme-"))
        self.fagen = build / "tools" / "fagen" / "fagen"
        self.gpu_commands = {"check", "bench", "tune"}
        self.have_torch = None

    # ---- bookkeeping ------------------------------------------------------------------------------
    def ok(self, where, what):
        self.passed += 1
        if self.verbose:
            print(f"ok    {where}: {what}")

    def skip(self, where, what, why):
        self.skipped.append(f"{where}: {what}: {why}")
        print(f"SKIP: {where}: {what}: {why}")

    def fail(self, where, what, why):
        self.failed.append(f"{where}: {what}")
        print(f"FAIL  {where}: {what}\n      {why.rstrip()}".replace("\n", "\n      "))

    # ---- running ----------------------------------------------------------------------------------
    def workdir(self):
        """A fresh scratch directory holding only a link build -> DIR (files written with -o land in it)."""
        d = Path(tempfile.mkdtemp(dir=self.scratch))
        (d / "build").symlink_to(self.build)
        return d

    def env(self, gpu_hidden=False):
        e = dict(os.environ)
        e["PATH"] = f"{self.fagen.parent}{os.pathsep}{e.get('PATH', '')}"
        e["PYTHONPATH"] = str(REPO / "python" / "src")
        e["FAJIT_LIB"] = str(self.build / "libfajit.so")
        e["FAJIT_CACHE_DIR"] = str(self.scratch / "cache")  # never the user's cache
        if gpu_hidden:
            e["CUDA_VISIBLE_DEVICES"] = ""
        return e

    def run(self, argv, cwd, env, shell=False, timeout=TIMEOUT):
        try:
            p = subprocess.run(argv, cwd=cwd, env=env, shell=shell, capture_output=True, text=True,
                               timeout=timeout, executable="/bin/bash" if shell else None)
            return p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            return None, "", f"timed out after {timeout} s"

    def torch_ok(self):
        if self.have_torch is None:
            self.have_torch = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode == 0
        return self.have_torch

    # ---- sh ---------------------------------------------------------------------------------------
    def sh_line(self, where, line, test_command):
        if EXAMPLE_PREFIX in line:  # a line for an installed fajit: --installed runs it
            if self.installed is not None:
                d = self.installed_dir()
                for cmd in split_and(line):
                    if not self.run_installed_sh(where, cmd, d):
                        break
            elif self.verbose:
                print(f"--    {where}: {line} (scripts/check-install.sh runs it with --installed)")
            return
        if self.installed is not None:
            return
        cmds = split_and(line)
        for cmd in cmds:
            self.sh_command(where, cmd, test_command)
        if any(safe_split(c)[:1] == ["scripts/test.sh"] for c in cmds):
            test_command.append(line)

    def sh_command(self, where, cmd, test_command):
        words = safe_split(cmd)
        if not words:
            return
        first = words[0]
        if first == "fagen" or first.startswith(("./build/", "build/")):
            self.run_fagen(where, cmd, words)
        elif first in ("python", "python3"):
            self.run_python_line(where, cmd, words)
        elif first.startswith(("scripts/", ".ci/")):
            path = REPO / first
            if not (path.is_file() and os.access(path, os.X_OK)):
                self.fail(where, cmd, f"{first} is not an executable file of the repository")
            else:
                self.ok(where, f"{first} exists")
        elif first in NOT_RUN_HERE:
            if self.verbose:
                print(f"--    {where}: {cmd} (not run here: the build and test scripts run it)")
        else:
            self.fail(where, cmd, f"the checker does not know how to run a line starting with {first!r}: "
                      "teach scripts/check-readme.py, or mark the block <!-- readme-check: skip REASON -->")

    def run_fagen(self, where, cmd, words):
        first_of_pipe = split_pipe(cmd)
        argv = safe_split(first_of_pipe)
        if argv[0] == "fagen":
            argv[0] = str(self.fagen)
        sub = next((w for w in argv[1:] if not w.startswith("-")), "")
        gpu = sub in self.gpu_commands
        wd = self.workdir()
        rc, out, err = self.run(argv, wd, self.env(gpu_hidden=gpu))
        if rc == 0:
            self.ok(where, cmd)
        elif rc == 1 and gpu:
            self.ok(where, f"{cmd} (command line accepted; needs a GPU)")
        elif rc == 1 and re.search(r"could not be loaded|LIBRARY_MISSING|not found", err):
            self.skip(where, cmd, err.strip().splitlines()[-1])
        else:
            self.fail(where, cmd, f"exit {rc}: {err.strip() or out.strip()[-500:]}")

    def run_python_line(self, where, cmd, words):
        code = words[words.index("-c") + 1] if "-c" in words else None
        if code is None:
            self.fail(where, cmd, "only `python3 -c CODE` lines are run")
            return
        self.run_python(where, code, cmd)

    def run_python(self, where, code, what):
        if self.no_python:
            self.skip(where, what, self.no_python)
            return
        if re.search(r"^\s*import\s+torch|import torch|from torch", code, re.M) and not self.torch_ok():
            self.skip(where, what, "torch is not installed here (the block needs it)")
            return
        if "cuda" in code and self.torch_ok():
            rc, _, _ = self.run([sys.executable, "-c", "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"],
                                REPO, self.env())
            if rc != 0:
                self.skip(where, what, "no CUDA device visible to torch (the block runs on a GPU)")
                return
        rc, out, err = self.run([sys.executable, "-c", code], self.workdir(), self.env())
        if rc == 0:
            self.ok(where, what)
        else:
            self.fail(where, what, f"exit {rc}: {err.strip()[-800:]}")

    # ---- c, cmake, installed ----------------------------------------------------------------------
    def compile_c(self, where, src):
        d = self.workdir()
        (d / "app.c").write_text(src)
        srcs = [str(d / "app.c")]
        has_main = re.search(r"\bint\s+main\s*\(", src) is not None
        exe = d / "app"
        argv = [self.cc, *self.cflags, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(REPO / "include"), *srcs]
        argv += ["-o", str(exe), str(self.build / "libfajit.a"), "-ldl", "-lpthread", "-lm"] if has_main else \
            ["-c", "-o", str(d / "app.o")]
        rc, out, err = self.run(argv, d, self.env())
        if rc != 0:
            self.fail(where, "C block: compile (and link against libfajit.a)", f"{' '.join(argv)}\n{err}")
            return
        if not has_main:
            self.ok(where, "C block compiles (no main: not linked or run)")
            return
        rc, out, err = self.run([str(exe)], d, self.env())
        if rc == 0:
            self.ok(where, "C block compiles, links and runs")
        elif rc == 77:
            self.skip(where, "C block", (err or out).strip().splitlines()[-1] if (err or out).strip() else "exit 77")
        else:
            self.fail(where, "C block runs", f"exit {rc}: {err.strip()}")

    def installed_dir(self):
        d = self.workdir()
        (d / "app.c").write_text(self.c_main or "int main(void) { return 0; }\n")
        return d

    def run_cmake_block(self, where, body):
        d = self.installed_dir()
        (d / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.22)\nproject(readme_app C)\n"
                                          "add_executable(app app.c)\n" + body + "\n")
        b = d / "out"
        for argv in (["cmake", "-S", str(d), "-B", str(b), f"-DCMAKE_PREFIX_PATH={self.installed}"],
                     ["cmake", "--build", str(b)], [str(b / "app")]):
            rc, out, err = self.run(argv, d, self.env())
            if rc != 0:
                self.fail(where, f"CMake block against {self.installed}: {' '.join(argv)}", f"exit {rc}: {err}{out[-1500:]}")
                return
        self.ok(where, f"CMake block: configured against {self.installed}, built and ran")

    def run_installed_sh(self, where, cmd, d):
        """One command of a line naming /opt/fajit, with /opt/fajit = the installed prefix, in d."""
        words = safe_split(cmd)
        if words[0] == "cmake" and ("-S" in words or "--build" in words):
            if self.verbose:
                print(f"--    {where}: {cmd} (not run: the build every test starts from)")
            return True
        real = cmd.replace(EXAMPLE_PREFIX, str(self.installed))
        rc, out, err = self.run(real, d, self.env(), shell=True)
        if rc != 0:
            self.fail(where, real, f"exit {rc}: {err.strip()}{out.strip()[-1000:]}")
            return False
        self.ok(where, f"{cmd} (with {EXAMPLE_PREFIX} = {self.installed})")
        return True

    # ---- fagen --help -----------------------------------------------------------------------------
    def help_examples(self):
        rc, out, err = self.run([str(self.fagen), "--help"], REPO, self.env())
        if rc != 0:
            self.fail("fagen --help", "fagen --help", f"exit {rc}: {err}")
            return
        cmds = []
        section = None
        for line in out.splitlines():
            if re.match(r"^\S.*:$", line):
                section = line[:-1]
                continue
            m = re.match(r"^  (\w+)\s+(.*)$", line)
            if section == "commands" and m:
                cmds.append(m.group(1))
                if "GPU" in m.group(2) and "no GPU" not in m.group(2):
                    self.gpu_commands.add(m.group(1))
        if not cmds:
            self.fail("fagen --help", "fagen --help", "lists no commands")
        helps = [("fagen --help", out)]
        for c in cmds:
            rc, o, e = self.run([str(self.fagen), c, "--help"], REPO, self.env())
            if rc != 0:
                self.fail(f"fagen {c} --help", f"fagen {c} --help", f"exit {rc}: {e}")
            helps.append((f"fagen {c} --help", o))
        n = 0
        for where, text in helps:
            section = None
            for line in text.splitlines():
                if re.match(r"^\S.*:$", line):
                    section = line[:-1]
                    continue
                m = re.match(r"^example:\s+(fagen\s.*)$", line) or (
                    re.match(r"^\s+(fagen\s.*)$", line) if section == "examples" else None)
                if m:
                    n += 1
                    self.sh_line(where, m.group(1), [])
        if n == 0:
            self.fail("fagen --help", "examples", "no example line found in fagen's help texts")

    # ---- README -----------------------------------------------------------------------------------
    def readme(self, path):
        blocks = parse_blocks(path)
        self.c_main = next((b.text for b in blocks if b.lang == "c" and re.search(r"\bint\s+main\s*\(", b.text)), None)
        if self.installed is not None and self.c_main is None:
            self.fail(path.name, "C block", "no C block with main(): nothing for the CMake and pkg-config lines to build")
        test_command = []
        for b in blocks:
            where = f"{path.name}:{b.line}"
            if b.skip is not None:
                if not b.skip:
                    self.fail(where, f"```{b.lang} block", "skip marker without a reason")
                else:
                    self.skip(where, f"```{b.lang} block", f"marked: {b.skip}")
                continue
            if b.lang in ("sh", "bash", "shell", "console"):
                for line in logical_lines(b.text):
                    self.sh_line(where, line, test_command)
            elif b.lang == "c" and self.installed is None:
                self.compile_c(where, b.text)
            elif b.lang in ("python", "py") and self.installed is None:
                self.run_python(where, b.text, "python block")
            elif b.lang == "cmake":
                if self.installed is not None:
                    self.run_cmake_block(where, b.text)
                elif self.verbose:
                    print(f"--    {where}: cmake block (run by scripts/check-install.sh)")
        if self.installed is None:
            self.ci_command(path, test_command)
            self.links(path)

    def links(self, path):
        """Every relative link of the file names a file or folder of the repository."""
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                t = target.split("#")[0]
                if not t or re.match(r"^[a-z]+:", t):
                    continue
                if (path.parent / t).exists():
                    self.ok(f"{path.name}:{n}", f"link {t}")
                else:
                    self.fail(f"{path.name}:{n}", f"link {t}", "no such file in the repository")

    def ci_command(self, path, test_command):
        ci = REPO / ".ci" / "run"
        lines = [l.strip() for l in ci.read_text().splitlines() if l.strip() and not l.lstrip().startswith("#")]
        runs = [l for l in lines if "scripts/test.sh" in l]
        if not test_command:
            self.fail(path.name, "test command", "no sh line of the README runs scripts/test.sh")
        elif not runs:
            self.fail(".ci/run", "test command", ".ci/run does not run scripts/test.sh")
        elif not any(r == t for r in runs for t in test_command):
            self.fail(".ci/run", "test command", f".ci/run runs {runs!r}; the README's lines that run scripts/test.sh "
                      f"are {test_command!r}: .ci/run must run one of them exactly")
        else:
            self.ok(".ci/run", f"runs the README's test command: {runs[0]}")


class Block:
    def __init__(self, lang, line, text, skip):
        self.lang, self.line, self.text, self.skip = lang, line, text, skip


def parse_blocks(path):
    blocks, lines = [], path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        skip = None
        if i > 0:
            mk = MARKER.match(lines[i - 1].strip())
            if mk:
                skip = mk.group(1)
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        blocks.append(Block(m.group(2).lower(), start, "\n".join(body) + "\n", skip))
        i += 1
    return blocks


def logical_lines(text):
    """Lines of an sh block with backslash continuations joined, comments and blanks dropped."""
    out, cur = [], ""
    for raw in text.splitlines():
        if raw.rstrip().endswith("\\"):
            cur += raw.rstrip()[:-1] + " "
            continue
        cur += raw
        code = strip_comment(cur).strip()
        if code:
            out.append(code)
        cur = ""
    return out


def strip_comment(line):
    """Drop an unquoted `# ...` that starts a word."""
    q, prev = None, " "
    for i, ch in enumerate(line):
        if q:
            if ch == q:
                q = None
        elif ch in "'\"":
            q = ch
        elif ch == "#" and prev.isspace():
            return line[:i]
        prev = ch
    return line


def split_top(line, sep):
    """Split at an unquoted separator outside $( )."""
    parts, q, depth, cur, i = [], None, 0, "", 0
    while i < len(line):
        ch = line[i]
        if q:
            q = None if ch == q else q
        elif ch in "'\"":
            q = ch
        elif line.startswith("$(", i):
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
        elif depth == 0 and line.startswith(sep, i) and not (sep == "|" and (line.startswith("||", i) or cur.endswith("|"))):
            parts.append(cur)
            cur = ""
            i += len(sep)
            continue
        cur += ch
        i += 1
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def split_and(line):
    return split_top(line, "&&")


def split_pipe(cmd):
    return split_top(cmd, "|")[0]


def line_of(cmd):
    return cmd.strip()


def safe_split(cmd):
    try:
        return shlex.split(cmd)
    except ValueError:
        return cmd.split()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="the build directory (default: build)")
    ap.add_argument("--installed", metavar="PREFIX", help="also check the blocks that need an installed fajit")
    ap.add_argument("--readme", default=str(REPO / "README.md"))
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"), help="C compiler for the C blocks (default: $CC or cc)")
    ap.add_argument("--cflags", default="", help="extra flags for the C blocks, e.g. the build's -fsanitize=...")
    ap.add_argument("--no-python", metavar="REASON", help="skip the Python lines and blocks, saying REASON")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    build = Path(a.build)
    build = (build if build.is_absolute() else Path.cwd() / build).resolve()
    if not (build / "tools" / "fagen" / "fagen").exists() or not (build / "libfajit.a").exists():
        print(f"check-readme: {build} has no built fagen and libfajit.a", file=sys.stderr)
        return 2
    installed = Path(a.installed).resolve() if a.installed else None
    ch = Checker(build, installed, a.verbose, a.cc, a.cflags.split(), a.no_python)
    try:
        if installed is None:
            ch.help_examples()
        ch.readme(Path(a.readme).resolve())
    finally:
        shutil.rmtree(ch.scratch, ignore_errors=True)
    mode = f"installed package {installed}" if installed else f"build {build}"
    print(f"check-readme ({mode}): {ch.passed} passed, {len(ch.skipped)} skipped, {len(ch.failed)} failed")
    return 1 if ch.failed else 0


if __name__ == "__main__":
    sys.exit(main())
